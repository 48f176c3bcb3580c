package redlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/internal/rediscore"
)

var _ elector.Switcher = (*Elector)(nil)

// A switchover is the resignation's leave on every server, naming the
// target: each server that the leaver still holds the term on commits the
// handover token to the target's newest live claiming entry there (an
// older one is a crashed copy's, lapsing) instead of the head's
// (stepScript), answers "handed" (or "passed", to the head, where the
// target is not live), and publishes the target as the head, which wakes
// it alone. The target leads once that reached a majority, as a head
// successor does, and only then does ResignTo return nil (resign); where
// it reached only a minority, the handover is withdrawn and overwritten as
// ever, the head leads once a majority grants it, and ResignTo reports the
// switchover failed (see doc.go, Handover). The entries ahead of the
// target keep their places.

// queuedScript reports whether a live claiming entry of candidate ARGV[1],
// other than the term's holder, waits on this server.
//
// KEYS: queue expiry cand term claims
var queuedScript = rediscore.QueuedScript("5", " and redis.call('ZSCORE', KEYS[1], e)")

// Queued reports whether a candidate with this ID waits, claiming, on a
// majority of the servers.
func (e *Elector) Queued(ctx context.Context, id string) error {
	k := e.keys
	found, answered := 0, 0
	var errs []error
	for i, s := range e.cfg.Servers {
		cctx, cancel := e.request(ctx, i)
		n, err := queuedScript.Run(cctx, s.Client, []string{k.queue, k.expiry, k.cand, k.term, k.claims}, id).Int()
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.Addr, err))
			continue
		}
		answered++
		found += n
	}
	switch {
	case found >= e.m:
		return nil
	case answered >= e.m:
		return &elector.NotQueuedError{ID: id}
	}
	return &elector.StoreError{Op: "switchover", Err: fmt.Errorf("read the line on a majority: %w", errors.Join(errs...))}
}
