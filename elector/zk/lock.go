package zk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/electd/electd/elector"
)

// runNode is the name of the election's run record, beside its candidate
// nodes (which it cannot be mistaken for: it has no sequence number).
const runNode = "run"

// runData is the run record's node: the record, and the instant it lapses
// by the recording host's clock (ZooKeeper's TTL nodes need a server
// setting, extendedTypesEnabled, that electd does not ask for).
type runData struct {
	Run   json.RawMessage `json:"run"`
	Lapse time.Time       `json:"lapse"`
}

// RecordRun stores r in the election's run node, a persistent node, with
// the instant it lapses (now + period by this host's clock).
func (e *Elector) RecordRun(ctx context.Context, r elector.RunRecord, period time.Duration) error {
	b, err := elector.EncodeRun(r, period)
	if err != nil {
		return err
	}
	v, err := json.Marshal(runData{Run: b, Lapse: e.cfg.Clock.Now().Add(period)})
	if err != nil {
		return fmt.Errorf("encode the run node: %w", err)
	}
	s, err := e.ready(ctx)
	if err != nil {
		return storeErr("record", err)
	}
	p := e.base + "/" + runNode
	_, err = do(ctx, s, func(z *zk.Conn) (struct{}, error) { return struct{}{}, put(z, p, v, e.cfg.Store.acl()) })
	if err != nil {
		e.cfg.Instrument.StoreError("record", err)
		return storeErr("record", err)
	}
	return nil
}

// LastRun returns the election's live run record, or ErrNoRun.
func (e *Elector) LastRun(ctx context.Context) (elector.RunRecord, error) {
	s, err := e.ready(ctx)
	if err != nil {
		return elector.RunRecord{}, storeErr("last-run", err)
	}
	b, err := do(ctx, s, func(z *zk.Conn) ([]byte, error) {
		b, _, err := z.Get(e.base + "/" + runNode)
		return b, err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return elector.RunRecord{}, elector.ErrNoRun
	case err != nil:
		e.cfg.Instrument.StoreError("last-run", err)
		return elector.RunRecord{}, storeErr("last-run", err)
	}
	var d runData
	if json.Unmarshal(b, &d) != nil || len(d.Run) == 0 {
		return elector.DecodeRun(b), nil // written by hand: it does not lapse
	}
	if !e.cfg.Clock.Now().Before(d.Lapse) {
		return elector.RunRecord{}, elector.ErrNoRun
	}
	return elector.DecodeRun(d.Run), nil
}

// ForgetRun deletes the election's run record, if any (`electd lock
// --forget`).
func (e *Elector) ForgetRun(ctx context.Context) error {
	s, err := e.ready(ctx)
	if err != nil {
		return storeErr("forget", err)
	}
	_, err = do(ctx, s, func(z *zk.Conn) (struct{}, error) { return struct{}{}, z.Delete(e.base+"/"+runNode, -1) })
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		e.cfg.Instrument.StoreError("forget", err)
		return storeErr("forget", err)
	}
	return nil
}

// ready is the elector's session once it holds one.
func (e *Elector) ready(ctx context.Context) (*session, error) {
	s, err := e.session()
	if err != nil {
		return nil, err
	}
	if _, err := s.ready(ctx); err != nil {
		return nil, err
	}
	return s, nil
}
