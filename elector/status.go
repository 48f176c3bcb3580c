package elector

import (
	"context"
	"time"
)

// Queuer is an Elector that can show its election's line (`electd status`,
// GET /status). Every backend implements it and asserts so at compile
// time. Queue is a read: one request where the store allows, never a
// write, and it needs no campaign of its own. It reports nothing to the
// candidate's Instrument (a reading on demand would leave a failure in
// /healthz that nothing clears): its error says it all.
type Queuer interface {
	// Queue reads the election's candidates in arrival order, holders
	// flagged. A store that does not answer is a *StoreError.
	Queue(ctx context.Context) (Queue, error)
}

// Queue is one reading of an election's line.
type Queue struct {
	// Candidates are every live candidate, first arrived first. A holder
	// is among the first Slots; a candidate ahead of a holder may wait
	// (a store grants in order, but a grant may be pending).
	Candidates []Queued `json:"candidates"`
	// Slots is how many candidates may hold at once, as the queued ones
	// say (1 for a plain election, and when nobody is queued).
	Slots int `json:"slots"`
	// Agreement says, for a store of several independent servers (a
	// quorum), what the reading rests on: how many servers answered, and
	// that a candidate is shown only where a majority agrees. Empty
	// elsewhere.
	Agreement string `json:"agreement,omitempty"`
}

// Queued is one candidate in an election's line.
type Queued struct {
	ID      string `json:"id"`
	Address string `json:"address,omitempty"`
	// Order is the store's own arrival mark (etcd: the key's create
	// revision; Redis: the queue's sequence number; Redlock: the
	// candidate's campaign start in µs; Kubernetes: the ticket's
	// creation resourceVersion). Only its order means anything.
	Order uint64 `json:"order"`
	// Arrived is when the candidate joined, where the store records it
	// (Redlock: by the candidate's clock; Kubernetes: the API server's);
	// zero where it does not (etcd, Redis).
	Arrived time.Time `json:"arrived,omitzero"`
	// Holder is true for a candidate that holds a term (a slot).
	Holder bool `json:"holder"`
	// Token is a holder's fencing token; for a waiter, the token it will
	// lead with if the store fixes it in advance (etcd: its key's create
	// revision), else 0.
	Token uint64 `json:"fencing_token,omitempty"`
	// Since is when a holder's term began (zero if the store does not say).
	Since time.Time `json:"since,omitzero"`
	// Expires is when the candidate's lease lapses unless renewed, by this
	// host's clock (a server-clock deadline is carried over by the
	// server's reading of its own time); zero where the store does not
	// say without another request (etcd).
	Expires time.Time `json:"expires,omitzero"`
}

// Holders are the candidates of q that hold a term, in arrival order.
func (q Queue) Holders() []Queued {
	var hs []Queued
	for _, c := range q.Candidates {
		if c.Holder {
			hs = append(hs, c)
		}
	}
	return hs
}

// Leader is the holder as a Leader, for a Queued that holds.
func (c Queued) Leader() Leader {
	return Leader{ID: c.ID, Address: c.Address, Token: c.Token, Since: c.Since}
}
