package redis

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/internal/rediscore"
	"github.com/electd/electd/elector/internal/rediskit"
)

// Campaign joins the queue and blocks until this candidate leads, ctx ends
// or Redis refuses the election for good. Transient store errors are retried
// with capped exponential backoff. A campaign that returns an error removes
// its entry (best effort). If this candidate's own lease lapses while it
// waits, it rejoins at the back of the queue with a new entry.
func (e *Elector) Campaign(ctx context.Context) (*elector.Term, error) {
	return e.campaign(ctx, false)
}

// TryCampaign joins the queue and returns a term if this candidate holds at
// once; if others hold the election (every slot), the same script removes
// its entry again and TryCampaign returns elector.ErrBusy. A free election
// whose state is younger than one TTL (first use, or after a Redis restart)
// is waited for, at most that TTL: nobody else holds it.
func (e *Elector) TryCampaign(ctx context.Context) (*elector.Term, error) {
	return e.campaign(ctx, true)
}

func (e *Elector) campaign(ctx context.Context, try bool) (*elector.Term, error) {
	return e.core.Campaign(ctx, e.bus.start, e.bus.waitLive, func(ctx context.Context) (*elector.Term, error) {
		start := e.cfg.Clock.Now()
		stale := ""
		told := false // whether the epoch's wait was logged
		for {
			term, next, err := e.candidacy(ctx, stale, start, try, &told)
			switch {
			case term != nil:
				return term, nil
			case err != nil:
				return nil, err
			}
			stale = next
		}
	})
}

// errAbandoned ends the deadline of a candidacy that never led.
var errAbandoned = errors.New("candidacy abandoned")

// candidacy is one entry's life in the queue, until it leads (term), must
// be replaced by a new entry (err nil; stale is the entry to drop when
// rejoining), or the campaign ends (err). The first wait for the state's
// epoch is logged, and told set.
func (e *Elector) candidacy(ctx context.Context, stale string, start time.Time, try bool, told *bool) (term *elector.Term, restale string, err error) {
	clk, timing := e.cfg.Clock, e.cfg.Timing
	entry := e.core.NewEntry()
	log := e.log.With("entry", entry)
	l := e.bus.Add(func(head, _ string) bool { return head == entry })
	defer e.bus.Remove(l)

	b := e.core.NewBackoff()
	mode, join := "join", "join"
	if try {
		mode, join = "try", "try"
	}
	var (
		dl       *elector.Deadline
		dlDone   <-chan struct{}
		lastSend time.Time
		wakeAt   time.Time // zero: no wake-up armed
		lastErr  error
	)
	defer func() {
		if term == nil && dl != nil {
			dl.End(errAbandoned) // stops its timer; no term was built on it
		}
	}()
	for {
		send := clk.Now()
		cctx, ccancel := e.request(ctx)
		dropArg, op := "", "renew"
		if mode == join {
			dropArg, op = stale, "join"
		}
		r, err := e.step(cctx, mode, entry, 0, dropArg)
		ccancel()
		if err != nil {
			if ctx.Err() != nil {
				e.cleanup(entry, stale)
				return nil, "", campaignEnded(ctx, lastErr)
			}
			if isPermanent(err) {
				e.inst.StoreError(op, err)
				log.Error("redis refused the campaign", "err", err)
				e.cleanup(entry, stale)
				return nil, "", &elector.StoreError{Op: "campaign", Err: explain(err), Permanent: true}
			}
			lastErr = err
			e.fails.Failed(op, err, "entry", entry)
			e.core.Wait(ctx, nil, b.Next(), false, dlDone)
			if ctx.Err() != nil {
				e.cleanup(entry, stale)
				return nil, "", campaignEnded(ctx, lastErr)
			}
			if dl != nil && dl.Err() != nil {
				log.Info("lease lapsed while waiting; rejoining with a new entry")
				return nil, entry, nil
			}
			continue
		}
		b.Reset()
		e.fails.Answered(op)
		lastErr = nil
		switch r.status {
		case "gone":
			log.Info("entry gone from the store (expired or state lost); rejoining")
			return nil, "", nil
		case "wait", "leader":
		case "busy": // the script removed the entry
			log.Debug("held by others; left at once", "head", r.head)
			return nil, "", elector.ErrBusy
		case "slots": // the script did not add the entry
			return nil, "", &elector.SlotsError{Election: e.cfg.Election, Mine: e.Slots(), Theirs: r.theirSlots}
		default:
			err := rediskit.Permanent(fmt.Errorf("unexpected status %q", r.status))
			e.cleanup(entry, stale)
			return nil, "", &elector.StoreError{Op: "campaign", Err: explain(err), Permanent: true}
		}
		if dl == nil {
			dl = elector.NewDeadline(clk, timing, send).ReportTo(e.inst)
			dlDone = dl.Done()
			if !clk.Now().Before(dl.ValidUntil()) {
				dl.End(elector.ErrLeaseExpired)
			}
			log.Debug("joined the queue", "head", r.head)
		} else if _, ok := dl.Renewed(send); !ok {
			log.Info("lease lapsed while waiting; rejoining with a new entry")
			return nil, entry, nil
		}
		if dl.Err() != nil {
			return nil, entry, nil
		}
		mode, stale, lastSend = "wait", "", send
		if r.status == "leader" {
			t, err := e.grant(entry, dl, r, send, start)
			return t, "", err
		}
		if r.young != "" && !*told {
			*told = true
			rediskit.LogEpochWait(log, r.young, r.wake, clk.Now())
		}
		wakeAt = time.Time{}
		if r.wake >= 0 {
			wakeAt = clk.Now().Add(r.wake + rediscore.WakeSlack)
		}

		// Sleep until the next renewal, a message naming us, or the moment
		// the candidate ahead of us (or the holder) may have lapsed.
		next, woken := lastSend.Add(timing.RenewInterval), false
		if !wakeAt.IsZero() && wakeAt.Before(next) {
			next, woken = wakeAt, true
		}
		if !e.core.Wait(ctx, l, max(next.Sub(clk.Now()), 0), woken, dlDone) {
			if ctx.Err() != nil {
				e.cleanup(entry, "")
				return nil, "", campaignEnded(ctx, nil)
			}
			log.Info("lease lapsed while waiting; rejoining with a new entry")
			return nil, entry, nil
		}
	}
}

func campaignEnded(ctx context.Context, lastErr error) error {
	return rediscore.CampaignEnded(ctx, "redis", "last store error", lastErr)
}

// grant turns an entry that the store made leader into a Term, and starts
// the goroutine that renews it.
func (e *Elector) grant(entry string, dl *elector.Deadline, r stepReply, sent, start time.Time) (*elector.Term, error) {
	self := elector.Leader{ID: e.cfg.ID, Address: e.cfg.Address, Token: r.token, Since: r.since}
	if e.cfg.Replicas > 0 {
		sent = e.confirmGrant(entry, r.token, dl, sent)
	}
	term := elector.NewTerm(self, dl, func(ctx context.Context) error { return e.resign(ctx, entry) }).
		WithSwitchover(e, func(ctx context.Context, id string) error { return e.handTo(ctx, entry, id) })
	return e.core.Lead(term, dl, entry, r.token, start, func() { e.keep(entry, r.token, dl, sent) }, func() { e.cleanup(entry, "") })
}

// confirmGrant renews a grant at once, so that it is no longer pending
// (see stepScript) and the leader view names its holder: a grant whose
// reply counts only once replicas have it is written before its WAIT, and
// is no term if that fails. A failed renewal costs nothing here: keep
// renews it again. It returns the send time of the latest renewal that
// counted (sent if none).
func (e *Elector) confirmGrant(entry string, token uint64, dl *elector.Deadline, sent time.Time) time.Time {
	send := e.cfg.Clock.Now()
	ctx, cancel := e.request(e.ctx)
	r, err := e.step(ctx, "hold", entry, token, "")
	cancel()
	if err != nil || r.status != "leader" {
		e.log.Debug("could not confirm the grant at once; the next renewal does", "entry", entry, "status", r.status, "err", err)
		return sent
	}
	e.fails.Answered("renew")
	dl.Renewed(send)
	return send
}

// keep renews a term every RenewInterval until its deadline ends, then
// removes the entry unless the term ended by Resign (which removed it).
func (e *Elector) keep(entry string, token uint64, dl *elector.Deadline, lastSend time.Time) {
	clk, timing := e.cfg.Clock, e.cfg.Timing
	log := e.log.With("entry", entry, "token", token)
	// Any message naming another head, or a re-subscription (state may have
	// changed unseen), triggers an immediate check.
	match := func(head, _ string) bool { return head != entry }
	if e.Slots() > 1 {
		// Other holders and grants are named all the time; only a
		// re-subscription (state may have changed unseen) triggers a check.
		match = func(string, string) bool { return false }
	}
	l := e.bus.Add(match)
	defer e.bus.Remove(l)
	b := e.core.RenewBackoff()
	next := lastSend.Add(timing.RenewInterval)
	for dl.Err() == nil {
		e.core.Pause(dl, l, next)
		if dl.Err() != nil {
			break
		}
		send := clk.Now()
		ctx, cancel := e.request(e.ctx)
		r, err := e.step(ctx, "hold", entry, token, "")
		cancel()
		if err == nil {
			e.fails.Answered("renew")
		}
		switch {
		case err != nil && e.ctx.Err() != nil:
			dl.End(elector.ErrClosed)
		case err != nil:
			// No error ends the term early, whatever its class: a store
			// that cannot persist (MISCONF), is out of memory, is failing
			// over or refuses us costs this renewal, and the deadline,
			// which no store error moves, decides. A refusal that lasts
			// (an ACL change) is logged as such.
			if isPermanent(err) {
				err = explain(err)
			}
			e.fails.Failed("renew", err, "entry", entry, "valid_until", dl.ValidUntil())
			next = clk.Now().Add(b.Next())
		case r.status == "leader":
			b.Reset()
			dl.Renewed(send)
			next = send.Add(timing.RenewInterval)
		case r.status == "gone":
			dl.End(elector.ErrLeaseLost)
		default: // "lost"
			dl.End(elector.ErrLeadershipLost)
		}
	}
	if !errors.Is(rediscore.Ended(log, dl), elector.ErrResigned) {
		e.cleanup(entry, "")
	}
}

// resign removes our entry and term in one script, which publishes the new
// head so that the successor takes over at once.
func (e *Elector) resign(ctx context.Context, entry string) error {
	ctx, cancel := e.core.Resigning(ctx)
	defer cancel()
	if err := e.leave(ctx, "resign", entry, ""); err != nil {
		e.log.Warn("resign failed; the successor waits for the lease to expire", "entry", entry, "err", err)
		return err
	}
	e.log.Info("resigned", "entry", entry)
	return nil
}
