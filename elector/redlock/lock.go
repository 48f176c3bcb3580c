package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/redis/rediskit"
)

// RecordRun stores r in every server's lastrun key with SET PX period
// (each server deletes it when the period lapses); it succeeds once a
// majority has it, so that every later majority meets a server that does.
func (e *Elector) RecordRun(ctx context.Context, r elector.RunRecord, period time.Duration) error {
	b, err := elector.EncodeRun(r, period)
	if err != nil {
		return err
	}
	errs := make([]error, len(e.cfg.Servers))
	fanOut(len(errs), func(i int) {
		if err := e.cfg.Servers[i].Client.Set(ctx, e.keys.lastRun, b, period).Err(); err != nil {
			errs[i] = fmt.Errorf("%s: %w", e.cfg.Servers[i].Addr, rediskit.Classify(err))
		}
	})
	if err := e.quorumErr(errs); err != nil {
		e.inst.StoreError("record", err)
		return &elector.StoreError{Op: "record", Err: err, Permanent: isPermanent(err)}
	}
	return nil
}

// LastRun asks every server and returns the newest live run record any
// of them has, or ErrNoRun; it needs a majority's answers.
func (e *Elector) LastRun(ctx context.Context) (elector.RunRecord, error) {
	errs := make([]error, len(e.cfg.Servers))
	recs := make([][]byte, len(e.cfg.Servers))
	fanOut(len(errs), func(i int) {
		b, err := e.cfg.Servers[i].Client.Get(ctx, e.keys.lastRun).Bytes()
		switch {
		case errors.Is(err, redis.Nil):
		case err != nil:
			errs[i] = fmt.Errorf("%s: %w", e.cfg.Servers[i].Addr, rediskit.Classify(err))
		default:
			recs[i] = b
		}
	})
	if err := e.quorumErr(errs); err != nil {
		e.inst.StoreError("last-run", err)
		return elector.RunRecord{}, &elector.StoreError{Op: "last-run", Err: err, Permanent: isPermanent(err)}
	}
	var newest elector.RunRecord
	found := false
	for _, b := range recs {
		if b == nil {
			continue
		}
		r := elector.DecodeRun(b)
		if !found || r.Finished.After(newest.Finished) {
			newest, found = r, true
		}
	}
	if !found {
		return elector.RunRecord{}, elector.ErrNoRun
	}
	return newest, nil
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
