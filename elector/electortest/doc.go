// Package electortest is the conformance suite every elector backend must
// pass, against a real store: one call to Run exercises ordering, handover,
// fencing tokens, observation, a leader cut off from the store, a store
// restart, cancellation and a crowd of candidates. RunLock exercises the
// lock features a backend may offer (elector.TryCampaigner, elector.Slotted,
// elector.RunRecorder): trying once, semaphores, slot-count mismatches and
// run records.
//
// A backend provides a Harness that makes candidates and restarts the store;
// the suite routes candidates through TCP fault proxies (internal/faultproxy)
// where it needs to cut one off.
package electortest
