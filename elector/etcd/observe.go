package etcd

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electd/electd/clock"
	"github.com/electd/electd/elector"
)

// Leader returns the current leader from a view kept by a watch on the
// election's keys; only the first call waits for the view to load.
func (e *Elector) Leader(ctx context.Context) (elector.Leader, error) {
	e.startView()
	return e.hub.Leader(ctx)
}

// Observe sends the current leader, then every change, until ctx ends or
// the Elector closes. A zero Leader means the election has none.
func (e *Elector) Observe(ctx context.Context) <-chan elector.Leader {
	e.startView()
	return e.hub.Subscribe(ctx)
}

func (e *Elector) startView() {
	e.viewOnce.Do(func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.closed {
			return
		}
		e.wg.Add(1)
		go e.runView()
	})
}

// candidate is one key of the election.
type candidate struct {
	rev int64
	val value
}

// runView loads every candidate key, then follows changes with one watch,
// publishing the candidate with the lowest create revision as leader.
// A leader change costs no request beyond the watch event itself.
func (e *Elector) runView() {
	defer e.wg.Done()
	for e.ctx.Err() == nil {
		err := e.followView()
		if e.ctx.Err() != nil {
			return
		}
		e.fails.Failed("observe", err)
		if e.wait(e.ctx, 100*time.Millisecond) != nil {
			return
		}
	}
}

func (e *Elector) followView() error {
	gctx, cancel := context.WithTimeout(e.ctx, e.opTimeout())
	resp, err := e.client.Get(gctx, e.pfx, clientv3.WithPrefix())
	cancel()
	if err != nil {
		return err
	}
	e.fails.Answered("observe")
	cands := make(map[string]candidate, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		cands[string(kv.Key)] = candidate{rev: kv.CreateRevision, val: decodeValue(kv.Value)}
	}
	// A new head whose key does not carry its start yet is held back
	// until it does: the candidate writes it (proclaimSince) as soon as it
	// knows it leads, so watchers see the term once, with the leader's own
	// start time (the child's ELECTD_LEADER_SINCE), rather than first with
	// our clock and then with its. If it does not come within opTimeout
	// (the proclaim failed), the head is published with the moment we
	// first saw it. Meanwhile the view still shows what it showed.
	var (
		held  elector.Leader // the head held back, Since = when first seen
		grace clock.Timer    // non-nil while held
	)
	release := func() {
		if grace != nil {
			grace.Stop()
			grace = nil
		}
		held = elector.Leader{}
	}
	defer release()
	publish := func(graceOver bool) {
		next := elector.Leader{}
		var best candidate
		for _, c := range cands {
			if best.rev == 0 || c.rev < best.rev {
				best = c
				next = elector.Leader{ID: c.val.ID, Address: c.val.Address, Token: uint64(c.rev)}
			}
		}
		switch prev, ok := e.hub.Current(); {
		case next.IsZero():
		case !best.val.Since.IsZero():
			next.Since = best.val.Since // the leader's own timestamp
		case ok && prev.SameTerm(next):
			next.Since = prev.Since // unchanged leader: keep when we first saw it
		case held.SameTerm(next) && graceOver:
			next.Since = held.Since
		case held.SameTerm(next):
			return // still waiting for the leader's timestamp
		default:
			release()
			held = next
			held.Since = e.clk.Now()
			grace = e.clk.NewTimer(e.opTimeout())
			return
		}
		release()
		e.hub.Publish(next) // the hub drops repeats
	}
	publish(false)

	wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(e.ctx))
	defer wcancel()
	watch := e.client.Watch(wctx, e.pfx, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
	for {
		var graceOver <-chan time.Time
		if grace != nil {
			graceOver = grace.C()
		}
		select {
		case <-graceOver:
			grace = nil
			publish(true)
			continue
		case wr, ok := <-watch:
			if !ok {
				return errors.New("watch closed")
			}
			if err := wr.Err(); err != nil {
				return err
			}
			for _, ev := range wr.Events {
				k := string(ev.Kv.Key)
				if ev.Type == mvccpb.DELETE {
					delete(cands, k)
				} else {
					cands[k] = candidate{rev: ev.Kv.CreateRevision, val: decodeValue(ev.Kv.Value)}
				}
			}
			publish(false)
		}
	}
}
