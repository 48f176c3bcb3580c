package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/internal/rediscore"
	"github.com/electd/electd/elector/internal/rediskit"
	"github.com/electd/electd/internal/backoff"
)

// Campaign joins every server's queue and blocks until a majority of them
// grant this candidate the term, ctx ends or the servers refuse the
// election for good. Transient errors of any server are retried. A
// campaign that returns an error removes its entry from every server it
// reaches.
func (e *Elector) Campaign(ctx context.Context) (*elector.Term, error) {
	return e.campaign(ctx, false)
}

// TryCampaign joins and returns a term if a majority grants it at once;
// if another candidate holds or is ahead on enough servers that no
// majority can, it leaves again and returns elector.ErrBusy. Servers whose
// state is younger than one TTL (first use, or a restart) are waited for,
// at most that TTL: nobody else holds them.
func (e *Elector) TryCampaign(ctx context.Context) (*elector.Term, error) {
	return e.campaign(ctx, true)
}

func (e *Elector) campaign(ctx context.Context, try bool) (*elector.Term, error) {
	return e.core.Campaign(ctx, e.bus.start, e.bus.waitLive, func(ctx context.Context) (*elector.Term, error) {
		return e.candidacy(ctx, try)
	})
}

// tally counts one round's answers.
type tally struct {
	answered, held, young, taken int
	// firstYoung is the first server that answered young (-1: none).
	firstYoung int
	refused    []error // permanent errors
	floor      uint64  // the highest token any server knows
	since      time.Time
	wake       []time.Time // per server: when it may let us hold (zero: unknown)
	// committed: per token, the servers whose grant to us is committed
	// with it (a predecessor's handover, or our own earlier commit).
	committed map[uint64][]int
	views     []serverView // per server: its leader view in this round
	mine      []uint64     // per server: the token its grant to us is committed with
}

func (e *Elector) count(res []result, now time.Time) tally {
	t := tally{firstYoung: -1, wake: make([]time.Time, len(res)), committed: map[uint64][]int{}, views: make([]serverView, len(res)), mine: make([]uint64, len(res))}
	for i, r := range res {
		switch {
		case r.err != nil && rediskit.IsPermanent(r.err):
			t.refused = append(t.refused, fmt.Errorf("%s: %w", e.cfg.Servers[i].Addr, r.err))
			continue
		case r.err != nil:
			continue
		}
		t.answered++
		t.floor = max(t.floor, r.r.floor)
		t.views[i] = serverView{r: r.r.view, until: now.Add(r.r.view.Remaining), synced: true}
		switch r.r.status {
		case "held":
			t.held++
			t.wake[i] = now
			if r.r.mine != 0 {
				t.committed[r.r.mine] = append(t.committed[r.r.mine], i)
				t.mine[i] = r.r.mine
			}
			if r.r.at.After(t.since) {
				t.since = r.r.at
			}
		case "young":
			if t.young == 0 {
				t.firstYoung = i
			}
			t.young++
		case "taken":
			t.taken++
		}
		if r.r.status != "held" && r.r.wake >= 0 {
			t.wake[i] = now.Add(r.r.wake + rediscore.WakeSlack)
		}
	}
	return t
}

// candidacy is one entry's life in the queues, until it leads or the
// campaign ends. The entry keeps its order (its place) on every server for
// the whole campaign: a server that lost it (a restart, or its lease there
// lapsed while the server was unreachable) takes it back at the next step.
func (e *Elector) candidacy(ctx context.Context, try bool) (*elector.Term, error) {
	clk, timing := e.cfg.Clock, e.cfg.Timing
	start := clk.Now()
	entry, ord := e.core.NewEntry(), order(start)
	log := e.log.With("entry", entry)
	// A message our own step published tells nothing the step's reply did
	// not: a join that reaches a server before those ahead of us names us
	// there, and must not count as a wake-up.
	l := e.bus.Add(func(head, from string) bool { return head == entry && from != entry })
	defer e.bus.Remove(l)

	b, splits := e.core.NewBackoff(), e.core.NewBackoff()
	// claim: ask to be granted; only while a majority answers, so that a
	// candidate cut off from a majority does not hold grants others need.
	claim := true
	// spent are the tokens this candidacy committed or withdrew (see spent).
	spent := newSpent()
	var lastErr error
	told := false // whether a server's epoch was logged
	for {
		send := clk.Now()
		res := e.round(ctx, nil, "join", "join", entry, ord, 0, time.Time{}, claim)
		if ctx.Err() != nil {
			e.cleanup(entry, 0)
			return nil, campaignEnded(ctx, lastErr)
		}
		t := e.count(res, clk.Now())
		if i := t.firstYoung; i >= 0 && t.held < e.m && !told {
			told = true
			rediskit.LogEpochWait(log, res[i].r.young, res[i].r.wake, clk.Now(), "server", e.cfg.Servers[i].Addr, "young", t.young)
		}
		claimed := claim
		claim = t.answered >= e.m
		if len(t.refused) > len(res)-e.m {
			err := errors.Join(t.refused...)
			e.inst.StoreError("campaign", err)
			log.Error("the redlock servers refused the campaign", "err", err)
			e.cleanup(entry, 0)
			return nil, &elector.StoreError{Op: "campaign", Err: rediskit.Explain(err), Permanent: true}
		}
		var jitter time.Duration
		switch {
		case t.answered < e.m:
			lastErr = fmt.Errorf("%d of %d servers answered, a majority is %d", t.answered, len(res), e.m)
			if !e.core.Wait(ctx, l, b.Next(), false, nil) {
				e.cleanup(entry, 0)
				return nil, campaignEnded(ctx, lastErr)
			}
			continue
		case t.held >= e.m:
			term, err := e.grant(ctx, entry, ord, res, t, start, spent)
			if term != nil || err != nil {
				return term, err
			}
			// The commit reached no majority: withdrawn; try again.
			jitter = splits.Next()
		case len(t.committed) > 0 && e.ledByOther(t, clk.Now()):
			// Grants committed to us (a handover that reached a minority)
			// while another term holds a majority: no term of ours, and
			// they keep that term's servers from it. Withdraw them.
			for tok, servers := range t.committed {
				want := make([]bool, len(res))
				for _, i := range servers {
					want[i] = true
				}
				log.Debug("withdrawing grants committed to us while another leads", "token", tok, "servers", len(servers))
				spent.add(tok)
				e.round(ctx, want, "withdraw", "withdraw", entry, ord, tok, time.Time{}, false)
			}
		case try && claimed && t.held+t.young < e.m:
			log.Debug("held by others; left at once")
			e.cleanup(entry, 0)
			return nil, elector.ErrBusy
		case t.held > 0 && t.taken > 0:
			// A split vote: others hold uncommitted grants where we do not,
			// and nobody has a majority. Withdraw ours (the queues agree,
			// so the first in line takes them) and retry after a jitter.
			log.Debug("split vote; withdrawing", "held", t.held, "taken", t.taken)
			e.round(ctx, nil, "withdraw", "withdraw", entry, ord, 0, time.Time{}, false)
			jitter = splits.Next()
		default:
			splits.Reset()
		}
		b.Reset()
		lastErr = nil

		// Sleep until the next renewal, a message naming us, or the moment
		// a majority of servers may let us hold.
		next, woken := send.Add(timing.RenewInterval), false
		if w, ok := quorumWake(t.wake); ok && w.Before(next) {
			next, woken = w, true
		}
		switch {
		case jitter > 0:
			next, woken = clk.Now().Add(jitter), false
		case claim && !claimed:
			next, woken = clk.Now(), false // a majority answers again: claim now
		}
		if !e.core.Wait(ctx, l, max(next.Sub(clk.Now()), 0), woken, nil) {
			e.cleanup(entry, 0)
			return nil, campaignEnded(ctx, nil)
		}
	}
}

// ledByOther reports whether a majority of the round's servers name one
// leader, on servers whose grant is not ours.
func (e *Elector) ledByOther(t tally, now time.Time) bool {
	l, _ := leaderOf(t.views, now, e.m)
	if l.IsZero() {
		return false
	}
	for i, v := range t.views {
		if v.r.OK && v.r.ID == l.ID && v.r.Token == l.Token && t.mine[i] == 0 {
			return true
		}
	}
	return false
}

func campaignEnded(ctx context.Context, lastErr error) error {
	return rediscore.CampaignEnded(ctx, "redlock", "last", lastErr)
}

// spent are the tokens a candidacy committed or withdrew. A withdraw of
// token X drops the candidacy's grant on a server wherever that grant is
// committed with X, whenever it lands: one held by the network may land
// long after it was sent. So the candidacy never leads with a spent token
// (a late withdraw could end a grant of its term on a server whose lease
// there its deadline still counts; see "The lease rule"), and never
// computes a token at or below the highest it spent (a commit that failed
// is withdrawn, and the servers that answer next may know no higher token).
type spent struct {
	tokens map[uint64]bool
	top    uint64
}

func newSpent() *spent { return &spent{tokens: map[uint64]bool{}} }

func (s *spent) add(tok uint64) {
	s.tokens[tok] = true
	s.top = max(s.top, tok)
}

func (s *spent) has(tok uint64) bool { return s.tokens[tok] }

// grant commits the token of a term a majority granted: the highest token
// any server of the round knows, any this Elector has seen and any this
// candidacy spent, plus one. The term starts only once a majority holds
// the entry committed with it, so every later majority meets a server that
// knows it (see the package documentation, "Fencing tokens"). It returns
// (nil, nil) if the commit reached no majority, after withdrawing it.
//
// A majority that already holds our grant committed with one token that
// this candidacy did not spend (a predecessor's handover, which commits
// its token + 1 to the next in line) is a term as it stands: it is taken
// without a commit.
func (e *Elector) grant(ctx context.Context, entry, ord string, joined []result, t tally, start time.Time, spent *spent) (*elector.Term, error) {
	sent := make([]time.Time, len(joined))
	var token uint64
	var since time.Time
	for tok, servers := range t.committed {
		// Never a token we committed or withdrew: a late withdraw of it
		// may still land.
		if len(servers) < e.m || spent.has(tok) {
			continue
		}
		token = tok
		for _, i := range servers {
			sent[i] = joined[i].sent
			since = joined[i].r.view.Since
		}
	}
	if token == 0 {
		token = max(t.floor, e.core.Seen(), spent.top) + 1
		if token > rediscore.MaxToken {
			return nil, &elector.StoreError{Op: "campaign", Err: fmt.Errorf("fencing token %d exceeds 2^53", token), Permanent: true}
		}
		since = t.since
		spent.add(token)
		res := e.round(ctx, nil, "grant", "hold", entry, ord, token, since, true)
		for i, r := range res {
			if r.err == nil && r.r.status == "held" && r.r.mine == token {
				sent[i] = r.sent
			}
		}
	}
	q, ok := quorumSent(sent)
	if !ok {
		e.log.Debug("commit reached no majority; withdrawing", "entry", entry, "token", token)
		e.round(ctx, nil, "withdraw", "withdraw", entry, ord, token, time.Time{}, false)
		return nil, nil
	}
	dl := elector.NewDeadline(e.cfg.Clock, e.cfg.Timing, q).ReportTo(e.inst)
	if !e.cfg.Clock.Now().Before(dl.ValidUntil()) {
		dl.End(elector.ErrLeaseExpired)
	}
	self := elector.Leader{ID: e.cfg.ID, Address: e.cfg.Address, Token: token, Since: since}
	resigned := make(chan struct{}) // Resign was called (once, by Term)
	term := elector.NewTerm(self, dl, func(ctx context.Context) error {
		close(resigned)
		return e.resign(ctx, entry, token, "")
	}).WithSwitchover(e, func(ctx context.Context, id string) error {
		close(resigned) // Term runs one of the two, once
		return e.resign(ctx, entry, token, id)
	})
	e.core.SawToken(token)
	return e.core.Lead(term, dl, entry, token, start, func() { e.keep(entry, ord, token, since, dl, sent, resigned) }, func() { e.cleanup(entry, 0) })
}

// keep renews a term on every server until its deadline ends, then removes
// the entry unless the term ended by Resign (which removed it). Each server
// is renewed every RenewInterval after its last acknowledged renewal, and
// one that failed is retried after a short backoff, on its own; the term's
// deadline follows the lease rule (quorumSent).
func (e *Elector) keep(entry, ord string, token uint64, since time.Time, dl *elector.Deadline, sent []time.Time, resigned <-chan struct{}) {
	clk, timing := e.cfg.Clock, e.cfg.Timing
	n := len(e.cfg.Servers)
	log := e.log.With("entry", entry, "token", token)
	l := e.bus.Add(func(string, string) bool { return false }) // (re)subscriptions only
	defer e.bus.Remove(l)
	due := make([]time.Time, n)
	lost := make([]bool, n) // the server's latest answer: it does not hold us
	var earned time.Time    // the deadline the renewals had earned when the servers ended the term
	backoffs := make([]*backoff.Backoff, n)
	now := clk.Now()
	for i := range due {
		backoffs[i] = e.core.RenewBackoff()
		if sent[i].IsZero() {
			due[i] = now.Add(backoffs[i].Next())
		} else {
			due[i] = sent[i].Add(timing.RenewInterval)
		}
	}
	for dl.Err() == nil {
		first := due[0]
		for _, d := range due[1:] {
			if d.Before(first) {
				first = d
			}
		}
		if e.core.Pause(dl, l, first) {
			// A server's subscription came back: it may have lost our
			// entry unseen; ask every server now.
			for i := range due {
				due[i] = clk.Now()
			}
		}
		if dl.Err() != nil {
			break
		}
		now := clk.Now()
		want := make([]bool, n)
		for i, d := range due {
			want[i] = !d.After(now.Add(time.Millisecond))
		}
		ctx, cancel := context.WithCancel(e.ctx)
		res := e.round(ctx, want, "renew", "hold", entry, ord, token, since, true)
		cancel()
		if e.ctx.Err() != nil {
			dl.End(elector.ErrClosed)
			break
		}
		for i, r := range res {
			if !want[i] {
				continue
			}
			switch {
			case r.err != nil:
				// No error ends the term early: the deadline decides.
				due[i] = clk.Now().Add(backoffs[i].Next())
			case r.r.status == "held":
				backoffs[i].Reset()
				if lost[i] {
					// The server took the term back (after a restart, or
					// a lapse): it may have lost the run record too.
					rctx, rcancel := e.request(e.ctx, i)
					e.repairRun(rctx, i)
					rcancel()
				}
				lost[i] = false
				if r.sent.After(sent[i]) {
					sent[i] = r.sent
				}
				due[i] = r.sent.Add(timing.RenewInterval)
			default:
				// Lapsed here, or the server lost its state: it takes us
				// back when it may (after its first TTL, if we are first).
				lost[i] = true
				due[i] = r.sent.Add(timing.RenewInterval)
			}
		}
		if q, ok := quorumSent(sent); ok {
			dl.Renewed(q)
		}
		nlost := 0
		for _, x := range lost {
			if x {
				nlost++
			}
		}
		if n-nlost < e.m {
			earned = dl.ValidUntil() // End clamps it to now
			dl.End(elector.ErrLeaseLost)
		}
	}
	if errors.Is(rediscore.Ended(log, dl), elector.ErrResigned) {
		return
	}
	// A term ended early by the servers' word still has the leases its
	// renewals earned: the child may be being stopped until then. Leave
	// (and hand over) only after them, unless Resign comes first (the
	// supervisor resigns once the child is gone) or the Elector closes.
	if wait := earned.Sub(clk.Now()); wait > 0 {
		t := clk.NewTimer(wait)
		select {
		case <-t.C():
		case <-resigned:
		case <-e.ctx.Done():
		}
		t.Stop()
		select {
		case <-resigned:
			return
		default:
		}
	}
	e.cleanup(entry, token+1)
}

// resign removes our entry from every server, each of which publishes its
// new head, so that the successor takes over at once (candidate to, if
// not empty: switchover.go). A renewal still in flight that lands after
// the removal is refused there (a leave is recorded for two TTLs).
func (e *Elector) resign(ctx context.Context, entry string, token uint64, to string) error {
	ctx, cancel := e.core.Resigning(ctx)
	defer cancel()
	handed, passed, err := e.leave(ctx, "resign", entry, token+1, to)
	if err != nil {
		e.log.Warn("resign did not reach every server; the successor waits there for the lease to expire", "entry", entry, "err", err)
		return err
	}
	if to == "" {
		e.log.Info("resigned", "entry", entry)
		return nil
	}
	// A switchover happened only if the target was handed the term on a
	// majority: it then leads at its next step. Where the target was not
	// live the next in line was handed it; if that is a majority, or the
	// target was live on no server that took the handover, it was a plain
	// resignation. Otherwise the handover split (the target on some
	// servers, the next in line on others, the leaver's lapsing term on
	// the rest): nobody may lead until the leaver's lease lapses where it
	// was not removed, and whoever wins then leads.
	switch n := len(e.cfg.Servers); {
	case handed >= e.m:
		e.log.Info("handed the term over", "entry", entry, "to", to, "servers", handed)
		return nil
	case passed >= e.m || (handed == 0 && passed > 0):
		e.log.Warn("switchover target not live on a majority; resigned to the next in line", "entry", entry, "to", to, "handed", handed, "passed", passed)
		return &elector.NotQueuedError{ID: to}
	default:
		e.log.Warn("switchover reached no majority; resigned, the next leader is whoever wins once the lease lapses", "entry", entry, "to", to, "handed", handed, "passed", passed)
		return &elector.StoreError{Op: "switchover", Err: fmt.Errorf("the term was handed to %q on %d of %d servers and to the next in line on %d (a majority is %d): resigned without a successor until the lease lapses", to, handed, n, passed, e.m)}
	}
}
