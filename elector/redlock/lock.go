package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/internal/rediscore"
	"github.com/electd/electd/elector/internal/rediskit"
)

// RecordRun stores r in every server's lastrun key for period, without a
// TTL (each server's clock lapses it: rediskit.RecordRun, so that a
// volatile-* eviction policy cannot take it); it succeeds once a majority
// has it, so that every later majority meets a server that does.
func (e *Elector) RecordRun(ctx context.Context, r elector.RunRecord, period time.Duration) error {
	b, err := elector.EncodeRun(r, period)
	if err != nil {
		return err
	}
	e.checkRunEviction(ctx)
	errs := e.onEach(func(_ int, c redis.UniversalClient) error {
		return rediskit.RecordRun(ctx, c, e.keys.lastRun, b, period).Err()
	})
	if err := e.quorumErr(errs); err != nil {
		return rediscore.StoreError(e.inst, "record", err)
	}
	e.recorded.Lock()
	e.recorded.b, e.recorded.until = b, e.cfg.Clock.Now().Add(period)
	e.recorded.Unlock()
	return nil
}

// recorded is the run record this Elector wrote last, kept so that a
// server that lost it (restarted empty) gets it back (repairRun).
type recorded struct {
	sync.Mutex
	b     []byte
	until time.Time // local: when its period lapses
	// evictable checks once whether a server may evict a run record.
	evictable sync.Once
}

// checkRunEviction warns, the first time this Elector reads or writes a
// run record, about every server whose maxmemory-policy may evict it.
func (e *Elector) checkRunEviction(ctx context.Context) {
	e.recorded.evictable.Do(func() {
		cctx, cancel := context.WithTimeout(ctx, e.core.CallTimeout())
		defer cancel()
		fanOut(len(e.cfg.Servers), func(i int) {
			rediskit.WarnRunEviction(cctx, e.cfg.Servers[i].Client, e.log)
		})
	})
}

// repairRun writes the run record this Elector recorded last to server i,
// unless the server has one (SET NX), for what is left of its period: a
// leader calls it when a server takes its term back after losing it, so
// that a rolling restart of servers without persistence, one at a time,
// does not lose the record of a job run under the term.
func (e *Elector) repairRun(ctx context.Context, i int) {
	e.recorded.Lock()
	b, left := e.recorded.b, e.recorded.until.Sub(e.cfg.Clock.Now())
	e.recorded.Unlock()
	if b == nil || left < time.Millisecond {
		return
	}
	if err := rediskit.RecordRunIfNone(ctx, e.cfg.Servers[i].Client, e.keys.lastRun, b, left).Err(); err != nil {
		e.fails[i].Failed("record", rediskit.Classify(err))
	}
}

// LastRun asks every server and returns the newest live run record any
// of them has, or ErrNoRun; it needs a majority's answers.
func (e *Elector) LastRun(ctx context.Context) (elector.RunRecord, error) {
	e.checkRunEviction(ctx)
	recs := make([][]byte, len(e.cfg.Servers))
	errs := e.onEach(func(i int, c redis.UniversalClient) error {
		b, err := rediskit.LastRun(ctx, c, e.keys.lastRun)
		switch {
		case errors.Is(err, redis.Nil):
			return nil
		case err != nil:
			return err
		}
		recs[i] = b
		return nil
	})
	if err := e.quorumErr(errs); err != nil {
		return elector.RunRecord{}, rediscore.StoreError(e.inst, "last-run", err)
	}
	var newest elector.RunRecord
	var raw []byte
	for _, b := range recs {
		if b == nil {
			continue
		}
		r := elector.DecodeRun(b)
		if raw == nil || r.Finished.After(newest.Finished) {
			newest, raw = r, b
		}
	}
	if raw == nil {
		return elector.RunRecord{}, elector.ErrNoRun
	}
	// Read repair: the servers that answered without it get it back, for
	// what is left of its period (by the recording host's clock, as the
	// record says), so that it outlives the next loss of a minority.
	if left := newest.Expires.Sub(e.cfg.Clock.Now()); left > time.Millisecond {
		fanOut(len(recs), func(i int) {
			if recs[i] == nil && errs[i] == nil {
				if err := rediskit.RecordRunIfNone(ctx, e.cfg.Servers[i].Client, e.keys.lastRun, raw, left).Err(); err != nil {
					e.fails[i].Failed("last-run", rediskit.Classify(err))
				}
			}
		})
	}
	return newest, nil
}

// ForgetRun deletes the run record on every server (`electd lock
// --forget`); it succeeds once a majority has deleted it. A server that
// did not answer may still hold the record, and LastRun's read repair then
// copies it back to the others when it answers again: the job is skipped
// until the record lapses (never run twice), and a second ForgetRun, once
// every server answers, clears it for good. That is logged as a warning.
func (e *Elector) ForgetRun(ctx context.Context) error {
	errs := e.onEach(func(_ int, c redis.UniversalClient) error {
		return rediskit.ForgetRun(ctx, c, e.keys.lastRun)
	})
	if err := e.quorumErr(errs); err != nil {
		return rediscore.StoreError(e.inst, "forget", err)
	}
	e.recorded.Lock()
	e.recorded.b = nil // repairRun must not write it back
	e.recorded.Unlock()
	if err := errors.Join(errs...); err != nil {
		e.log.Warn("run record cleared on a majority only: the servers that did not answer may still hold it, and a later read copies it back to the others (the job is then skipped until it lapses); clear it again once every server answers",
			"err", err)
	}
	return nil
}

// quorumErr is nil when a majority of errs are nil, else their join.
func (e *Elector) quorumErr(errs []error) error {
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
		}
	}
	if len(errs)-failed >= e.m {
		return nil
	}
	return fmt.Errorf("%d of %d servers answered, a majority is %d: %w", len(errs)-failed, len(errs), e.m, errors.Join(errs...))
}
