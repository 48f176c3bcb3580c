package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/internal/backoff"
)

// Campaign queues this candidate and blocks until it leads, ctx ends, the
// Elector closes, or the store refuses it for good (bad credentials or
// permissions). Transient store failures are retried with backoff; if the
// candidate's own lease lapses while it waits, it starts a new session and
// queues again. A campaign that returns an error has revoked its lease, so
// it leaves no key behind (or, if the store is unreachable, one that expires
// with the lease).
func (e *Elector) Campaign(ctx context.Context) (*elector.Term, error) {
	return e.campaign(ctx, false)
}

// TryCampaign joins the queue and returns a term if this candidate holds at
// once (first in line, or among the first Slots); otherwise it revokes its
// lease, which removes its key, and returns elector.ErrBusy. Transient store
// failures are retried until ctx ends, as in Campaign.
func (e *Elector) TryCampaign(ctx context.Context) (*elector.Term, error) {
	return e.campaign(ctx, true)
}

func (e *Elector) campaign(ctx context.Context, try bool) (*elector.Term, error) {
	backoff := 50 * time.Millisecond
	for {
		term, err := e.campaignOnce(ctx, try)
		if err == nil {
			return term, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if e.ctx.Err() != nil || errors.Is(err, elector.ErrClosed) {
			return nil, elector.ErrClosed
		}
		if se := (*elector.StoreError)(nil); errors.As(err, &se) && se.Permanent {
			return nil, fmt.Errorf("campaign: %w", err)
		}
		if errors.Is(err, elector.ErrBusy) {
			return nil, err
		}
		if me := (*elector.SlotsError)(nil); errors.As(err, &me) {
			return nil, err
		}
		if errors.Is(err, errSteppedAside) {
			e.log.Info("stepped aside for a switchover to a candidate behind us; queueing again")
			continue
		}
		e.fails.Retrying("campaign", err, "backoff", backoff) // counted where it failed
		if err := e.wait(ctx, backoff); err != nil {
			return nil, err
		}
		backoff = min(2*backoff, max(e.timing.RenewInterval, time.Second))
	}
}

// campaignOnce runs one session's campaign, the algorithm of etcd's
// concurrency.Election on a lease we renew ourselves: put our key under the
// lease if absent, wait for the deletion of the candidate just ahead of us
// (only that one: a leader's exit wakes only its successor), then confirm
// that our key is first and our lease still guaranteed.
//
// With Slots > 1 the candidate holds once fewer than Slots keys were
// created before its own; it waits for the deletion of any of the Slots
// keys just ahead of it (see waitSlots). With try, it gives up (ErrBusy)
// instead of waiting.
func (e *Elector) campaignOnce(ctx context.Context, try bool) (_ *elector.Term, err error) {
	s, err := e.newSession(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			rctx, cancel := context.WithTimeout(context.Background(), e.opTimeout())
			defer cancel()
			_ = s.release(rctx) // logged and counted inside
		}
	}()
	// The campaign lives only as long as the session can be guaranteed.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.ctx, cancel)()

	key := fmt.Sprintf("%s%x", e.pfx, int64(s.lease))
	rev, err := e.join(cctx, ctx, s, key)
	if err != nil {
		return nil, err
	}
	s.key, s.rev = key, rev
	e.fails.Answered("campaign")
	e.log.Debug("queued", "key", key, "rev", s.rev)

	slots := e.Slots()
	if slots == 1 {
		return e.claim(cctx, ctx, s, try)
	}
	if err := e.waitSlots(cctx, s.rev-1, slots, try); err != nil {
		return nil, e.sessionErr(s, ctx, "campaign", err)
	}

	// etcd's Election would return here even if our own key had gone with
	// an expired lease (a "zombie" leader). Check we really are among the
	// first Slots.
	gctx, gcancel := context.WithTimeout(cctx, e.opTimeout())
	g, err := e.client.Get(gctx, e.pfx, clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(int64(slots)))
	gcancel()
	if err != nil {
		return nil, e.sessionErr(s, ctx, "campaign", err)
	}
	if !holds(g.Kvs, key, s.rev) {
		return nil, errNotHead
	}
	if err := e.checkSlots(g.Kvs, key); err != nil {
		return nil, err
	}
	if err := s.dl.Err(); err != nil {
		return nil, err
	}

	self := elector.Leader{ID: e.id, Address: e.addr, Token: uint64(s.rev), Since: e.clk.Now()}
	if err := e.proclaimSince(cctx, s, self.Since); errors.Is(err, errNotHead) {
		return nil, err // else a store error: observers use their own clocks
	}
	return e.elected(s, self, g.Header.Revision+1), nil
}

// join puts our key under the session's lease and returns its create
// revision, our place in the queue. A put whose answer was lost (it timed
// out on a slow store) may have landed: the retry finds our key, named
// after our lease, and takes its place rather than leave it and queue
// again (which would wake the candidate behind it for nothing).
func (e *Elector) join(cctx, ctx context.Context, s *session, key string) (int64, error) {
	backoff := 50 * time.Millisecond
	for {
		tctx, cancel := context.WithTimeout(cctx, e.opTimeout())
		resp, err := e.client.Txn(tctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, e.value(), clientv3.WithLease(s.lease))).
			Else(clientv3.OpGet(key)).
			Commit()
		cancel()
		switch {
		case err == nil && resp.Succeeded:
			return resp.Header.Revision, nil
		case err == nil:
			kvs := resp.Responses[0].GetResponseRange().Kvs
			if len(kvs) == 1 && clientv3.LeaseID(kvs[0].Lease) == s.lease {
				return kvs[0].CreateRevision, nil // an earlier try's put
			}
			return 0, fmt.Errorf("campaign: key %s exists under another lease", key)
		}
		err = e.sessionErr(s, ctx, "campaign", err)
		if se := (*elector.StoreError)(nil); !errors.As(err, &se) || se.Permanent {
			return 0, err
		}
		e.fails.Retrying("campaign", err, "backoff", backoff) // counted in storeErr
		if err := e.wait(cctx, backoff); err != nil {
			return 0, e.sessionErr(s, ctx, "campaign", err)
		}
		backoff = min(2*backoff, max(e.timing.RenewInterval, time.Second))
	}
}

// claim waits until this candidate's key is the first of the election.
// One transaction both checks and takes the lead: if our key still exists
// and no key of the election was created before it, it writes the term's
// start into our key (observers report the leader's own timestamp);
// otherwise it returns the newest key ahead of us, whose deletion we watch.
// So after our predecessor's deletion one round trip makes us leader (a
// check also guards against the "zombie" that etcd's Election can return:
// a candidate whose own key expired with its lease).
func (e *Elector) claim(cctx, ctx context.Context, s *session, try bool) (*elector.Term, error) {
	backoff := 50 * time.Millisecond
	for {
		since := e.clk.Now()
		tctx, cancel := context.WithTimeout(cctx, e.opTimeout())
		resp, err := e.client.Txn(tctx).
			If(clientv3.Compare(clientv3.CreateRevision(s.key), "=", s.rev),
				clientv3.Compare(clientv3.CreateRevision(e.pfx), ">", s.rev-1).WithPrefix()).
			Then(clientv3.OpPut(s.key, e.leaderValue(s, since), clientv3.WithLease(s.lease))).
			Else(clientv3.OpGet(s.key),
				clientv3.OpGet(e.pfx, append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(s.rev-1))...)).
			Commit()
		cancel()
		if err != nil {
			err = e.sessionErr(s, ctx, "campaign", err)
			if se := (*elector.StoreError)(nil); !errors.As(err, &se) || se.Permanent {
				return nil, err
			}
			// A failed claim is no reason to lose our place while the
			// session holds (nor is a broken watch, below): else the
			// successor of a leader that resigned while the store was
			// slow requeues last, and wakes the next one, which may too.
			e.fails.Retrying("campaign", err, "backoff", backoff) // counted in storeErr
			if err := e.wait(cctx, backoff); err != nil {
				return nil, e.sessionErr(s, ctx, "campaign", err)
			}
			backoff = min(2*backoff, max(e.timing.RenewInterval, time.Second))
			continue
		}
		e.fails.Answered("campaign")
		e.fails.Answered("watch") // the re-check after a broken watch answered
		if resp.Succeeded {
			if err := s.dl.Err(); err != nil {
				return nil, err
			}
			self := elector.Leader{ID: e.id, Address: e.addr, Token: uint64(s.rev), Since: since}
			return e.elected(s, self, resp.Header.Revision+1), nil
		}
		own := resp.Responses[0].GetResponseRange().Kvs
		if len(own) == 0 && s.dl.Err() == nil {
			return nil, e.sessionErr(s, ctx, "campaign", errSteppedAside)
		}
		if !holds(own, s.key, s.rev) {
			return nil, e.sessionErr(s, ctx, "campaign", errNotHead)
		}
		ahead := resp.Responses[1].GetResponseRange().Kvs
		if len(ahead) == 0 {
			continue // the key ahead went between the compare and the read
		}
		if err := e.checkSlots(ahead, ""); err != nil {
			return nil, err
		}
		if try {
			return nil, elector.ErrBusy
		}
		e.watching.Add(1)
		lw := e.watchAhead(cctx)
		lw.offer(ahead[0])
		err = e.waitDelete(cctx, string(ahead[0].Key), resp.Header.Revision+1, lw.offer)
		lw.stop()
		if err != nil {
			if cctx.Err() != nil {
				return nil, e.sessionErr(s, ctx, "campaign", cctx.Err())
			}
			// A broken watch is not a reason to lose our place: look again.
			e.fails.Failed("watch", err, "on", "predecessor")
			if err := e.wait(cctx, 50*time.Millisecond); err != nil {
				return nil, e.sessionErr(s, ctx, "campaign", err)
			}
			continue
		}
		e.wakeups.Add(1)
		if rev, ok := e.firstNow(cctx, s); ok {
			if err := s.dl.Err(); err != nil {
				return nil, err
			}
			e.unclaimed.Add(1)
			self := elector.Leader{ID: e.id, Address: e.addr, Token: uint64(s.rev), Since: e.clk.Now()}
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				e.proclaimUntil(s, self.Since)
			}()
			return e.elected(s, self, rev+1), nil
		}
	}
}

// firstNow reports whether s's key is the first of the election, and the
// revision it read: the conditions of the claim's transaction, checked by
// a linearizable read instead of a write (the only key created at or
// before s's own is s's, with its lease). From that revision on s's key
// stays the first while it exists (a key created later has a later
// revision), and watchOwnKey watches it from the next; so the term may
// begin there, and the one write between two terms is the predecessor's
// deletion, as with etcdctl lock. It must be the store's present, not the
// deletion's revision: a successor whose host slept through its
// predecessor's resignation and its own lease's expiry sees that deletion
// late, and its key was the first then, but is gone now
// (TestSuspendedSuccessorWhoseKeyIsGone); and not a member's own copy,
// which may lag. A failed read returns false: the claim decides.
func (e *Elector) firstNow(ctx context.Context, s *session) (int64, bool) {
	if e.Slots() != 1 {
		return 0, false
	}
	gctx, cancel := context.WithTimeout(ctx, e.opTimeout())
	defer cancel()
	g, err := e.client.Get(gctx, e.pfx, clientv3.WithPrefix(), clientv3.WithMaxCreateRev(s.rev))
	if err != nil || len(g.Kvs) != 1 || !holds(g.Kvs, s.key, s.rev) || clientv3.LeaseID(g.Kvs[0].Lease) != s.lease {
		return 0, false
	}
	return g.Header.Revision, true
}

// elected starts watching our key from rev and returns the term.
func (e *Elector) elected(s *session, self elector.Leader, rev int64) *elector.Term {
	s.leading.Store(true)
	e.wg.Add(1)
	go e.watchOwnKey(s, rev)
	e.log.Info("elected", "token", self.Token, "valid_until", s.dl.ValidUntil())
	return elector.NewTerm(self, s.dl, s.release).
		WithSwitchover(e, func(ctx context.Context, id string) error { return e.handTo(ctx, s, id) })
}

// proclaimSince writes the term's start into our key, so that observers
// report the leader's own timestamp rather than when they noticed. A store
// error is returned as such (observers then use their own reading); a key
// that is gone is errNotHead.
func (e *Elector) proclaimSince(ctx context.Context, s *session, since time.Time) error {
	pctx, cancel := context.WithTimeout(ctx, e.opTimeout())
	defer cancel()
	resp, err := e.client.Txn(pctx).
		If(clientv3.Compare(clientv3.CreateRevision(s.key), "=", s.rev)).
		Then(clientv3.OpPut(s.key, e.leaderValue(s, since), clientv3.WithLease(s.lease))).
		Commit()
	if err != nil {
		// Counted, and logged at most once per class and 30 s: a new leader
		// retries it at the backoff's pace while the store is away.
		e.fails.Failed("campaign", err, "what", "record when the term began; until then observers use their own clocks")
		return err
	}
	e.fails.Answered("campaign")
	if !resp.Succeeded {
		return errNotHead
	}
	return nil
}

// proclaimUntil writes the start of a term that began without a claim into
// s's key, retrying a failed write until it lands or the term ends (a key
// gone is watchOwnKey's to see). Until it lands, observers hold the new
// leader back (followView) and the head waiter does not watch its lease
// (aheadWatch.offer): a leader lost before it lands, a round trip after
// its term began, is left to etcd's lessor, up to 500 ms after its lease.
func (e *Elector) proclaimUntil(s *session, since time.Time) {
	b := backoff.Waiting(e.timing.RenewInterval)
	for {
		err := e.proclaimSince(s.ctx, s, since)
		if err == nil || errors.Is(err, errNotHead) || s.ctx.Err() != nil {
			return
		}
		if e.wait(s.ctx, b.Next()) != nil {
			return
		}
	}
}

// sessionErr explains why a campaign step failed: the caller's context, the
// session's end, or the store.
func (e *Elector) sessionErr(s *session, ctx context.Context, op string, err error) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case s.dl.Err() != nil:
		return fmt.Errorf("%s: session ended while waiting: %w", op, s.dl.Err())
	case errors.Is(err, errNotHead), errors.Is(err, elector.ErrBusy):
		return err
	case errors.As(err, new(*elector.SlotsError)):
		return err
	default:
		var se *elector.StoreError
		if errors.As(err, &se) {
			return err
		}
		return e.storeErr(op, err)
	}
}

// waitDelete returns nil once key is deleted at or after rev; put, if not
// nil, is given every other change of key meanwhile.
func (e *Elector) waitDelete(ctx context.Context, key string, rev int64, put func(*mvccpb.KeyValue)) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for wr := range e.client.Watch(wctx, key, clientv3.WithRev(rev)) {
		if err := wr.Err(); err != nil {
			return err
		}
		for _, ev := range wr.Events {
			switch {
			case ev.Type == mvccpb.DELETE:
				return nil
			case put != nil:
				put(ev.Kv)
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.New("watch closed")
}

// watchOwnKey ends the term as soon as the store shows our key deleted or
// replaced, without waiting for the lease deadline.
func (e *Elector) watchOwnKey(s *session, rev int64) {
	defer e.wg.Done()
	for s.ctx.Err() == nil {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(s.ctx))
		var werr error
		for wr := range e.client.Watch(wctx, s.key, clientv3.WithRev(rev)) {
			if werr = wr.Err(); werr != nil {
				break
			}
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.DELETE || ev.Kv.CreateRevision != s.rev {
					cancel()
					if s.dl.End(elector.ErrLeadershipLost) {
						e.log.Warn("leader key deleted or replaced", "key", s.key, "at_rev", ev.Kv.ModRevision)
					}
					return
				}
			}
			rev = wr.Header.Revision + 1
		}
		cancel()
		if s.ctx.Err() != nil {
			return
		}
		if werr == nil {
			werr = errors.New("watch closed")
		}
		e.fails.Failed("watch", werr, "on", "own key")
		// We may have missed events (e.g. compaction): look the key up.
		if err := e.wait(s.ctx, 50*time.Millisecond); err != nil {
			return
		}
		gctx, gcancel := context.WithTimeout(s.ctx, e.opTimeout())
		g, err := e.client.Get(gctx, s.key)
		gcancel()
		switch {
		case err != nil:
			e.fails.Failed("watch", err, "on", "own key")
		case len(g.Kvs) == 0 || g.Kvs[0].CreateRevision != s.rev:
			s.dl.End(elector.ErrLeadershipLost)
			return
		default:
			e.fails.Answered("watch")
			rev = g.Header.Revision + 1
		}
	}
}
