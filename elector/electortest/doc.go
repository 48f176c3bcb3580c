// Package electortest is the conformance suite every elector backend must
// pass, against a real store: one call to Run exercises ordering, handover,
// fencing tokens, observation, a leader cut off from the store, a store
// restart, cancellation, a crowd of candidates, and a switchover to a named
// candidate (skipped for a backend that is no elector.Switcher). RunLock exercises the
// lock features of elector.Locker, which every backend offers (TryCampaign,
// semaphores by Candidate.Slots, RecordRun and LastRun): trying once,
// semaphores, slot-count mismatches and run records.
//
// A backend provides a Harness that makes candidates and restarts the store;
// the suite routes candidates through TCP fault proxies (internal/faultproxy)
// where it needs to cut one off.
//
// A few helpers serve the backends' own tests too: Campaign, MustLead,
// StillWaiting and Resign drive a candidate, Eventually polls a condition,
// and Logger is the logger their electors get ($ELECTD_TEST_LOG).
package electortest
