package etcd

import (
	"context"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electd/electd/elector"
)

// waitSlots is the wait of a semaphore of slots > 1 (claim waits for one
// slot): it waits until fewer than slots keys created at or before maxRev
// remain. Each time it
// watches the slots keys just ahead of ours: a deletion further ahead does
// not change that set, so only a deletion within it can let us hold. A
// release thus wakes at most slots waiters (those within slots places
// behind it), of which the first one holds. With try it returns ErrBusy
// instead of waiting.
func (e *Elector) waitSlots(ctx context.Context, maxRev int64, slots int, try bool) error {
	opts := []clientv3.OpOption{
		clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend),
		clientv3.WithLimit(int64(slots)),
		clientv3.WithMaxCreateRev(maxRev),
	}
	for {
		gctx, cancel := context.WithTimeout(ctx, e.opTimeout())
		resp, err := e.client.Get(gctx, e.pfx, opts...)
		cancel()
		if err != nil {
			return e.storeErr("campaign", err)
		}
		e.fails.Answered("watch") // the re-check after a broken watch answered
		if err := e.checkSlots(resp.Kvs, ""); err != nil {
			return err
		}
		if len(resp.Kvs) < slots {
			return nil
		}
		if try {
			return elector.ErrBusy
		}
		keys := make([]string, len(resp.Kvs))
		for i, kv := range resp.Kvs {
			keys[i] = string(kv.Key)
		}
		if err := e.waitAnyDelete(ctx, keys, resp.Header.Revision+1); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			e.fails.Failed("watch", err, "on", "keys ahead")
			if err := e.wait(ctx, 50*time.Millisecond); err != nil {
				return err
			}
			continue
		}
		e.wakeups.Add(1)
	}
}

// waitAnyDelete returns nil once any of keys is deleted at or after rev, or
// the first watch's error. The watches share the client's watch stream.
func (e *Elector) waitAnyDelete(ctx context.Context, keys []string, rev int64) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, len(keys))
	for _, k := range keys {
		go func() { errc <- e.waitDelete(wctx, k, rev, nil) }()
	}
	err := <-errc
	cancel()
	for range len(keys) - 1 {
		<-errc
	}
	return err
}

// holds reports whether the key created at rev is among kvs.
func holds(kvs []*mvccpb.KeyValue, key string, rev int64) bool {
	for _, kv := range kvs {
		if string(kv.Key) == key && kv.CreateRevision == rev {
			return true
		}
	}
	return false
}

// checkSlots refuses to mix slot counts: every candidate in kvs (other than
// own) must have been queued with ours.
func (e *Elector) checkSlots(kvs []*mvccpb.KeyValue, own string) error {
	mine := e.Slots()
	for _, kv := range kvs {
		if string(kv.Key) == own {
			continue
		}
		if theirs := decodeValue(kv.Value).slots(); theirs != mine {
			return &elector.SlotsError{Election: e.name, Mine: mine, Theirs: theirs}
		}
	}
	return nil
}

// RecordRun stores r under the election's run key, on a lease of period
// (rounded up to whole seconds): etcd deletes the record when it lapses.
func (e *Elector) RecordRun(ctx context.Context, r elector.RunRecord, period time.Duration) error {
	b, err := elector.EncodeRun(r, period)
	if err != nil {
		return err
	}
	lease, err := e.client.Grant(ctx, int64((period+time.Second-1)/time.Second))
	if err != nil {
		return e.storeErr("record", err)
	}
	if _, err := e.client.Put(ctx, e.runKey, string(b), clientv3.WithLease(lease.ID)); err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.opTimeout())
		defer cancel()
		_, _ = e.client.Revoke(rctx, lease.ID) // else it expires by itself
		return e.storeErr("record", err)
	}
	return nil
}

// LastRun returns the election's live run record, or ErrNoRun.
func (e *Elector) LastRun(ctx context.Context) (elector.RunRecord, error) {
	resp, err := e.client.Get(ctx, e.runKey)
	if err != nil {
		return elector.RunRecord{}, e.storeErr("last-run", err)
	}
	if len(resp.Kvs) == 0 {
		return elector.RunRecord{}, elector.ErrNoRun
	}
	return elector.DecodeRun(resp.Kvs[0].Value), nil
}

// ForgetRun deletes the election's run record, if any (`electd lock
// --forget`). The record's lease is left to lapse on its own: it holds no
// other key.
func (e *Elector) ForgetRun(ctx context.Context) error {
	if _, err := e.client.Delete(ctx, e.runKey); err != nil {
		return e.storeErr("forget", err)
	}
	return nil
}
