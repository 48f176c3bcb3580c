package redis

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/internal/rediscore"
	"github.com/electd/electd/elector/internal/rediskit"
)

// RecordRun stores r in the election's lastrun key for period. The key
// has no TTL, so that a volatile-* eviction policy cannot take it: the
// record lapses by the server's clock (rediskit.RecordRun).
func (e *Elector) RecordRun(ctx context.Context, r elector.RunRecord, period time.Duration) error {
	b, err := elector.EncodeRun(r, period)
	if err != nil {
		return err
	}
	e.checkRunEviction(ctx)
	if err := classify(e.recordRun(ctx, b, period)); err != nil {
		return rediscore.StoreError(e.inst, "record", err)
	}
	return nil
}

// recordRun sets the record; with Config.Replicas a WAIT follows on the same
// connection, and a record no replica has is not one (a failover would lose
// it, and the job could run twice in its period).
func (e *Elector) recordRun(ctx context.Context, b []byte, period time.Duration) error {
	if e.cfg.Replicas == 0 {
		return rediskit.RecordRun(ctx, e.cfg.Client, e.keys.lastRun, b, period).Err()
	}
	var set, wait *redis.Cmd
	_, err := e.cfg.Client.Pipelined(ctx, func(p redis.Pipeliner) error {
		set = rediskit.RecordRun(ctx, p, e.keys.lastRun, b, period)
		wait = p.Do(ctx, "WAIT", e.cfg.Replicas, waitTimeout(ctx, e.core.CallTimeout()).Milliseconds()+1)
		return nil
	})
	if set.Err() != nil {
		return set.Err()
	}
	if err != nil {
		return err
	}
	return e.replicated(wait)
}

// LastRun returns the election's live run record, or ErrNoRun. It reads
// records of both formats: with a lapse by the server's clock in the
// value, and (from an electd before it) with a TTL.
func (e *Elector) LastRun(ctx context.Context) (elector.RunRecord, error) {
	e.checkRunEviction(ctx)
	b, err := rediskit.LastRun(ctx, e.cfg.Client, e.keys.lastRun)
	switch {
	case errors.Is(err, redis.Nil):
		return elector.RunRecord{}, elector.ErrNoRun
	case err != nil:
		return elector.RunRecord{}, rediscore.StoreError(e.inst, "last-run", classify(err))
	}
	return elector.DecodeRun(b), nil
}

// ForgetRun deletes the election's run record, if any (`electd lock
// --forget`). Under Sentinel a DEL not yet replicated when the master
// fails over is lost, and the record comes back: the job is then skipped
// until the record lapses, never run twice.
func (e *Elector) ForgetRun(ctx context.Context) error {
	if err := rediskit.ForgetRun(ctx, e.cfg.Client, e.keys.lastRun); err != nil {
		return rediscore.StoreError(e.inst, "forget", classify(err))
	}
	return nil
}

// checkRunEviction warns, the first time this Elector reads or writes a
// run record, if the server's maxmemory-policy may evict it (allkeys-*).
func (e *Elector) checkRunEviction(ctx context.Context) {
	e.runEviction.Do(func() {
		cctx, cancel := e.request(ctx)
		defer cancel()
		rediskit.WarnRunEviction(cctx, e.cfg.Client, e.log)
	})
}
