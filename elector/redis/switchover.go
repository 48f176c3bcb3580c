package redis

import (
	"context"
	"fmt"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/internal/rediscore"
)

var _ elector.Switcher = (*Elector)(nil)

// A switchover is one run of stepScript in mode handto: the holder leaves,
// and the newest live entry of the named candidate (its latest arrival:
// an older one is a previous copy of it, crashed, whose entry lapses)
// moves to the head (it takes the holder's arrival score, so the entries
// it passes keep their order behind it) and is granted the term with the
// next token, in the same script. The message the script publishes names the new head, which
// wakes that candidate alone; it finds the term its own at its next step.
// As with Resign, the script runs only after the supervisor stopped the
// child (Term.ResignTo ends the term first), and, like a leave, it is not
// waited on for replicas: the successor's own step is.

// queuedScript reports whether a live entry of candidate ARGV[1], other
// than the term's, waits in the queue.
//
// KEYS: queue expiry cand term
var queuedScript = rediscore.QueuedScript("1", "")

// Queued reports whether a candidate with this ID waits behind the holder.
func (e *Elector) Queued(ctx context.Context, id string) error {
	if n := e.Slots(); n != 1 {
		return fmt.Errorf("switchover: election %q has %d slots; a switchover needs --slots 1", e.cfg.Election, n)
	}
	cctx, cancel := e.request(ctx)
	defer cancel()
	k := e.keys
	n, err := queuedScript.Run(cctx, e.cfg.Client, []string{k.queue, k.expiry, k.cand, k.term}, id).Int()
	if err != nil {
		return &elector.StoreError{Op: "switchover", Err: fmt.Errorf("read the queue: %w", classify(err))}
	}
	if n == 0 {
		return &elector.NotQueuedError{ID: id}
	}
	return nil
}

// handTo hands the ended term of entry to candidate id (see above). If id
// has left the queue meanwhile, the same script resigns plainly (the next
// in line leads) and handTo says so.
func (e *Elector) handTo(ctx context.Context, entry, id string) error {
	ctx, cancel := e.core.Resigning(ctx)
	defer cancel()
	r, err := e.leaveBy(ctx, "resign", "handto", entry, "", id)
	switch {
	case err != nil:
		e.log.Warn("switchover failed; the successor waits for the lease to expire", "entry", entry, "to", id, "err", err)
		return err
	case r.status == "notqueued":
		e.log.Warn("switchover target gone from the queue; resigned to the next in line", "entry", entry, "to", id, "head", r.head)
		return &elector.NotQueuedError{ID: id}
	}
	e.log.Info("handed the term over", "entry", entry, "to", id, "head", r.head)
	return nil
}
