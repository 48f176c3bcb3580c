package redis

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
)

// RecordRun stores r in the election's lastrun key with SET PX period:
// Redis deletes it when the period lapses.
func (e *Elector) RecordRun(ctx context.Context, r elector.RunRecord, period time.Duration) error {
	b, err := elector.EncodeRun(r, period)
	if err != nil {
		return err
	}
	if err := classify(e.recordRun(ctx, b, period)); err != nil {
		e.inst.StoreError("record", err)
		return &elector.StoreError{Op: "record", Err: err, Permanent: isPermanent(err)}
	}
	return nil
}

// recordRun sets the record; with Config.Replicas a WAIT follows on the same
// connection, and a record no replica has is not one (a failover would lose
// it, and the job could run twice in its period).
func (e *Elector) recordRun(ctx context.Context, b []byte, period time.Duration) error {
	if e.cfg.Replicas == 0 {
		return e.cfg.Client.Set(ctx, e.keys.lastRun, b, period).Err()
	}
	var set *redis.StatusCmd
	var wait *redis.Cmd
	_, err := e.cfg.Client.Pipelined(ctx, func(p redis.Pipeliner) error {
		set = p.Set(ctx, e.keys.lastRun, b, period)
		wait = p.Do(ctx, "WAIT", e.cfg.Replicas, waitTimeout(ctx, e.callTimeout()).Milliseconds()+1)
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

// LastRun returns the election's live run record, or ErrNoRun.
func (e *Elector) LastRun(ctx context.Context) (elector.RunRecord, error) {
	b, err := e.cfg.Client.Get(ctx, e.keys.lastRun).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return elector.RunRecord{}, elector.ErrNoRun
	case err != nil:
		err = classify(err)
		e.inst.StoreError("last-run", err)
		return elector.RunRecord{}, &elector.StoreError{Op: "last-run", Err: err, Permanent: isPermanent(err)}
	}
	return elector.DecodeRun(b), nil
}
