package redis

import (
	"context"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/internal/rediskit"
)

var _ elector.Queuer = (*Elector)(nil)

// Queue reads the election's line in one read-only script call
// (rediskit.ReadLine): the live entries in queue order, the holders with
// their tokens and the server's deadlines carried over to this host's
// clock. The queue is ordered by a sequence number, not a time: arrival
// times are left zero, and a waiter has no token until it is granted one.
// A line with no holder may have one pending: Redis grants at the next
// step of a candidate (at once after a resignation, within one TTL after
// a crash), and never in a state younger than one TTL.
func (e *Elector) Queue(ctx context.Context) (elector.Queue, error) {
	if e.ctx.Err() != nil {
		return elector.Queue{}, elector.ErrClosed
	}
	ctx, cancel := e.request(ctx)
	defer cancel()
	k := e.keys
	l, err := rediskit.ReadLine(ctx, e.cfg.Client, k.queue, k.expiry, k.cand, k.term, k.holders, k.slots)
	e.patience.Observe(err)
	if err != nil {
		err = e.classify(err)
		return elector.Queue{}, &elector.StoreError{Op: "status", Err: err, Permanent: isPermanent(err)}
	}
	now := e.cfg.Clock.Now()
	q := elector.Queue{Slots: max(l.Slots, 1), Candidates: make([]elector.Queued, 0, len(l.Entries))}
	for _, en := range l.Entries {
		q.Candidates = append(q.Candidates, en.Queued(l.At, now))
	}
	return q, nil
}
