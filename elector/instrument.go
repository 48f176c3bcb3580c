package elector

import "time"

// Instrument receives events from a backend that never reach the caller as
// errors (a failed renewal is retried, a broken watch is re-established), so
// they can be counted. Implementations must be safe for concurrent use and
// must not block.
type Instrument interface {
	// StoreError reports a failed store operation; op is a short stable name
	// such as "grant", "renew", "campaign", "watch", "resign", "leader".
	// ErrorClass(err) names its class.
	StoreError(op string, err error)
	// StoreAnswered reports that a request of op succeeded after failures,
	// or that its failing requests were given up: op does not fail now.
	StoreAnswered(op string)
	// Renewed reports a renewal of this candidate's lease that counted
	// (earned its deadline), and how long it took from its send to the
	// moment it counted: its answer, and its proof where the backend
	// proves renewals (etcd's raft entry, a Redlock quorum's last answer).
	// The deadline is counted from the send, so this is how much of the
	// window a renewal costs.
	Renewed(took time.Duration)
}

// NopInstrument discards every event.
type NopInstrument struct{}

// StoreError does nothing.
func (NopInstrument) StoreError(string, error) {}

// StoreAnswered does nothing.
func (NopInstrument) StoreAnswered(string) {}

// Renewed does nothing.
func (NopInstrument) Renewed(time.Duration) {}

// OrNop returns in, or NopInstrument when in is nil.
func OrNop(in Instrument) Instrument {
	if in == nil {
		return NopInstrument{}
	}
	return in
}
