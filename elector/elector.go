package elector

import (
	"context"
	"sync"
	"time"
)

// Elector is one candidate in one election.
type Elector interface {
	// Campaign blocks until this candidate leads, ctx ends, or the store
	// fails for good. Candidates are served in arrival order. A campaign
	// that returns an error leaves no candidacy behind in the store.
	Campaign(ctx context.Context) (*Term, error)
	// Leader returns the current leader, or ErrNoLeader.
	Leader(ctx context.Context) (Leader, error)
	// Observe sends the current leader and then every change (a zero Leader
	// meaning "none") until ctx ends or the Elector is closed, then closes
	// the channel. It is driven by the store's notifications, never a poll.
	// The same term may be sent again when its Since becomes known exactly
	// (the leader's own timestamp replacing the observer's first reading).
	Observe(ctx context.Context) <-chan Leader
	// Close ends any term and candidacy, releases store resources and stops
	// every goroutine the Elector started.
	Close() error
}

// Leader describes the holder of an election.
type Leader struct {
	ID      string    `json:"id"`
	Address string    `json:"address,omitempty"`
	Token   uint64    `json:"fencing_token"`
	Since   time.Time `json:"since"`
}

// IsZero reports whether l is "no leader".
func (l Leader) IsZero() bool { return l.ID == "" && l.Token == 0 }

// SameTerm reports whether l and o describe the same tenure: the same holder
// (ID) with the same fencing token. Address and Since are details of a term,
// not part of its identity: an observer may learn the exact Since later (the
// leader's own timestamp replacing its first reading), and a holder's
// Address says where to reach it, not which term it holds. Two "no leader"
// values are the same term; "no leader" and a leader are not.
func (l Leader) SameTerm(o Leader) bool { return l.ID == o.ID && l.Token == o.Token }

// Equal reports whether l and o agree in every field, Since compared as an
// instant (time.Time.Equal).
func (l Leader) Equal(o Leader) bool {
	return l.SameTerm(o) && l.Address == o.Address && l.Since.Equal(o.Since)
}

// Term is one tenure of leadership, as seen by the winner.
type Term struct {
	// Token is the fencing token: strictly greater than every earlier
	// term's token in this election.
	Token uint64
	// Leader is this candidate's own leader record.
	Leader Leader

	dl     *Deadline
	resign func(ctx context.Context) error
	// sw and handTo hand the term to a named candidate (switchover.go).
	sw     Switcher
	handTo func(ctx context.Context, id string) error
	once   sync.Once
	rerr   error
}

// NewTerm is for backends: it binds a fencing token to the deadline that
// guards it and to the function that hands leadership over.
func NewTerm(self Leader, dl *Deadline, resign func(ctx context.Context) error) *Term {
	return &Term{Token: self.Token, Leader: self, dl: dl, resign: resign}
}

// Done is closed when leadership can no longer be guaranteed.
func (t *Term) Done() <-chan struct{} { return t.dl.Done() }

// Err is nil while the term lasts and says why it ended afterwards
// (ErrLeaseExpired, ErrLeadershipLost, ErrResigned, ErrClosed, ...).
func (t *Term) Err() error { return t.dl.Err() }

// ValidUntil is the conservative local deadline: no other candidate can be
// granted leadership before it. It only moves forward, on renewals.
func (t *Term) ValidUntil() time.Time { return t.dl.ValidUntil() }

// Suspended is how long the host has been suspended since the term's
// deadline was first computed (when the grant was acknowledged): by that
// much, ValidUntil may be later than the lease on the store.
func (t *Term) Suspended() time.Duration { return t.dl.Suspended() }

// Remaining is how long the term is still guaranteed, by the given clock reading.
func (t *Term) Remaining(now time.Time) time.Duration { return t.dl.ValidUntil().Sub(now) }

// Resign ends the term and hands leadership over: waiting candidates see it
// at once. It is safe to call more than once and after the term has ended.
func (t *Term) Resign(ctx context.Context) error {
	t.once.Do(func() {
		t.dl.End(ErrResigned)
		t.rerr = t.resign(ctx)
	})
	return t.rerr
}
