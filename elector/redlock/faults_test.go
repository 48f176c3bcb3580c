package redlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/faultproxy"
)

// The fault tests of a quorum. Each asserts exactly that no two terms
// overlapped (each ended, Done and ValidUntil, before the next began) and
// that tokens only grew; the bounds on liveness are loose (2 cores, -race).

const faultTTL = 2 * time.Second

var faultSeq int

func faultElection(t *testing.T) string {
	faultSeq++
	return fmt.Sprintf("fault-%d-%d", time.Now().UnixNano()%1e9, faultSeq)
}

func (h *harness) candidate(t *testing.T, el, id string) elector.Locker {
	t.Helper()
	return h.New(t, electortest.Candidate{StoreAddr: h.Addr(), Candidate: elector.Candidate{
		Election: el, ID: id, Timing: elector.Timing{TTL: faultTTL}}})
}

// proxied makes a candidate that reaches server i through proxies[i].
func (h *harness) proxied(t *testing.T, el, id string) (elector.Locker, []*faultproxy.Proxy) {
	t.Helper()
	ps, addrs := h.proxies(t)
	return h.New(t, electortest.Candidate{StoreAddr: strings.Join(addrs, ","), Candidate: elector.Candidate{
		Election: el, ID: id, Timing: elector.Timing{TTL: faultTTL}}}), ps
}

// TestOneServerKilled: a leader keeps its term while one of three servers
// is down (its deadline rests on the other two), hands over on two, and
// the election goes on when the server comes back empty.
func TestOneServerKilled(t *testing.T) {
	h := newHarness(t, 3)
	el := faultElection(t)
	terms := electortest.CampaignLoop(t, h.candidate(t, el, "a"), h.candidate(t, el, "b"))
	first := terms.WaitLeading(t, 10*faultTTL)
	h.srvs[1].Kill(t)
	killed := time.Now()
	// The term outlives two TTLs on the other two servers.
	electortest.Eventually(t, 5*faultTTL, "the term renewed past two TTLs after the kill", func() bool {
		return first.Term.ValidUntil().After(killed.Add(2 * faultTTL))
	})
	if err := first.Term.Err(); err != nil {
		t.Fatalf("the term ended when one server of three was killed: %v", err)
	}
	// A handover on two servers.
	resigned := time.Now()
	if err := first.Term.Resign(context.Background()); err != nil {
		t.Fatalf("resign with one server down: %v", err)
	}
	next := terms.WaitStarted(t, resigned, faultTTL)
	t.Logf("with one server down: %s led %s after %s resigned", next.ID, next.Start.Sub(resigned).Round(time.Millisecond), first.ID)
	h.srvs[1].Start(t)
	back := time.Now()
	// The next handover again, with the server back (empty).
	electortest.Eventually(t, 5*faultTTL, "a term that started after the server came back", func() bool {
		if s, ok := terms.Leading(); ok && s.Start.Before(back) {
			_ = s.Term.Resign(context.Background())
		}
		s, ok := terms.Leading()
		return ok && s.Start.After(back)
	})
	spans := terms.Stop(t)
	t.Logf("%d terms, none overlapping, tokens growing", len(spans))
}

// TestServerRestartedEmptyMidTerm: a server that restarts empty under the
// leader neither ends the term nor grants anyone for one TTL; the leader
// takes it back (committed with its token) once it may, and the next term
// has a greater token.
func TestServerRestartedEmptyMidTerm(t *testing.T) {
	h := newHarness(t, 3)
	el := faultElection(t)
	a, b := h.candidate(t, el, "a"), h.candidate(t, el, "b")
	ra := electortest.MustLead(t, electortest.Campaign(context.Background(), a), 10*faultTTL, "a")
	cb := electortest.Campaign(context.Background(), b)
	electortest.Eventually(t, 5*time.Second, "b queued on every server", func() bool { return h.queuedOn(t, el) == [3]int{2, 2, 2} })
	restarted := time.Now()
	h.srvs[0].Restart(t)
	// The leader takes the server back, committed with its token, after
	// the server's first TTL.
	electortest.Eventually(t, 5*faultTTL, "the restarted server holds a's term again", func() bool {
		tok, _ := h.clis[0].HGet(context.Background(), keysFor(el).term, "token").Result()
		return tok == fmt.Sprint(ra.Term.Token)
	})
	regained := time.Since(restarted)
	if regained < faultTTL {
		t.Fatalf("the restarted server granted the term %s after it came back, within its first TTL %s", regained, faultTTL)
	}
	if err := ra.Term.Err(); err != nil {
		t.Fatalf("the term ended when one server restarted empty: %v", err)
	}
	electortest.StillWaiting(t, cb, "b")
	electortest.Resign(t, ra.Term)
	rb := electortest.MustLead(t, cb, faultTTL, "b")
	if rb.Term.Token <= ra.Term.Token {
		t.Fatalf("token %d after %d", rb.Term.Token, ra.Term.Token)
	}
	t.Logf("server back at 0; leader held it again at %s; b led with token %d > %d", regained.Round(time.Millisecond), rb.Term.Token, ra.Term.Token)
	electortest.Resign(t, rb.Term)
}

// queuedOn counts election's entries on each of three servers.
func (h *harness) queuedOn(t *testing.T, election string) [3]int {
	var n [3]int
	for i, c := range h.clis[:3] {
		v, err := c.ZCard(context.Background(), keysFor(election).queue).Result()
		if err != nil {
			t.Fatalf("count the queue on %s: %v", c.Options().Addr, err)
		}
		n[i] = int(v)
	}
	return n
}

// TestLeaderCutFromMajority: a leader that still reaches one server of
// three (a minority), and renews there, must have ended its term, by its
// own deadline, before the candidate that reaches the other two leads.
func TestLeaderCutFromMajority(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			h := newHarness(t, n)
			el := faultElection(t)
			a, pa := h.proxied(t, el, "a")
			ra := electortest.MustLead(t, electortest.Campaign(context.Background(), a), 10*faultTTL, "a")
			cb := electortest.Campaign(context.Background(), h.candidate(t, el, "b"))
			electortest.Eventually(t, 5*time.Second, "b queued", func() bool { return h.Queued(t, el) == 2 })
			doneAt := make(chan time.Time, 1)
			go func() { <-ra.Term.Done(); doneAt <- time.Now() }()
			cut := time.Now()
			for _, p := range pa[:majority(n)] { // a keeps the last n - m servers
				p.Cut()
			}
			rb := electortest.MustLead(t, cb, 4*faultTTL, "b")
			var aDone time.Time
			select {
			case aDone = <-doneAt:
			default:
				t.Fatalf("b led %s after the cut while a's term is open (valid until %s)", rb.At.Sub(cut), ra.Term.ValidUntil().Sub(cut))
			}
			if !aDone.Before(rb.At) || !ra.Term.ValidUntil().Before(rb.At) {
				t.Fatalf("a done %s, valid until %s, b led %s after the cut", aDone.Sub(cut), ra.Term.ValidUntil().Sub(cut), rb.At.Sub(cut))
			}
			if rb.Term.Token <= ra.Term.Token {
				t.Fatalf("token %d after %d", rb.Term.Token, ra.Term.Token)
			}
			t.Logf("cut at 0: a done at %s (%v), b led at %s, margin %s",
				aDone.Sub(cut).Round(time.Millisecond), ra.Term.Err(), rb.At.Sub(cut).Round(time.Millisecond), rb.At.Sub(aDone).Round(time.Millisecond))
			for _, p := range pa {
				p.Heal()
			}
			electortest.Resign(t, rb.Term)
		})
	}
}

// TestSplitVote: three candidates that each reach a different server
// are each granted that server, none a majority (a split vote), and none
// leads; once they reach every server, the split resolves (a candidate
// that does not reach a majority stops claiming, an uncommitted grant
// yields to the first claiming entry in the common order) and one leads,
// the others wait.
func TestSplitVote(t *testing.T) {
	for trial := range 3 {
		t.Run(fmt.Sprint(trial), func(t *testing.T) {
			h := newHarness(t, 3)
			el := faultElection(t)
			ctx := context.Background()
			h.grantAtOnce(t, el) // past the servers' first TTL, so that a first round grants
			var cands []elector.Elector
			var proxies [][]*faultproxy.Proxy
			for i, id := range []string{"a", "b", "c"} {
				c, ps := h.proxied(t, el, id)
				for j, p := range ps {
					if j != i {
						p.Cut() // candidate i reaches server i alone
					}
				}
				cands, proxies = append(cands, c), append(proxies, ps)
			}
			terms := electortest.CampaignLoop(t, cands...)
			var split time.Time
			electortest.Eventually(t, 5*faultTTL, "a split: each server granted one candidate", func() bool {
				held := map[string]bool{}
				for _, c := range h.clis {
					e, _ := c.HGet(ctx, keysFor(el).term, "entry").Result()
					held[strings.SplitN(e, "#", 2)[0]] = true
				}
				split = time.Now()
				return len(held) == 3 && !held[""]
			})
			for _, ps := range proxies {
				for _, p := range ps {
					p.Heal()
				}
			}
			if open := terms.Open(); len(open) != 0 {
				t.Fatalf("a candidate led on one server of three: %v", open)
			}
			s := terms.WaitLeading(t, 2*faultTTL)
			t.Logf("split seen and healed at 0: %s led at %s", s.ID, s.Start.Sub(split).Round(time.Millisecond))
			spans := terms.Stop(t)
			if len(spans) == 0 {
				t.Fatal("no term recorded")
			}
		})
	}
}

// runOf is a server's run as the script records it in born.
func runOf(t *testing.T, c interface {
	Info(ctx context.Context, section ...string) *redis.StringCmd
}) string {
	t.Helper()
	get := func(section, field string) string {
		info, err := c.Info(context.Background(), section).Result()
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
				return v
			}
		}
		return ""
	}
	return get("server", "run_id") + " " + get("replication", "master_replid")
}

// TestBlackHoledServer: a server that takes connections and never answers
// (a host gone without a reset) costs a round only a short grace once a
// majority answered, not the request's whole timeout: a campaign, and a
// handover, go as fast as the two servers that answer.
func TestBlackHoledServer(t *testing.T) {
	h := newHarness(t, 3)
	el := faultElection(t)
	ctx := context.Background()
	h.grantAtOnce(t, el) // past the servers' first TTL
	a, pa := h.proxied(t, el, "a")
	b, pb := h.proxied(t, el, "b")
	pa[2].Cut()
	pb[2].Cut()
	call := elector.Timing{TTL: faultTTL}.WithDefaults().RenewInterval // a request's timeout
	start := time.Now()
	ra := electortest.MustLead(t, electortest.Campaign(ctx, a), 10*faultTTL, "a")
	if took := ra.At.Sub(start); took >= call {
		t.Fatalf("a led %s after it began campaigning, with one server black-holed: as long as a request's timeout (%s)", took, call)
	} else {
		t.Logf("campaign with one server black-holed: %s", took.Round(time.Millisecond))
	}
	cb := electortest.Campaign(ctx, b)
	electortest.Eventually(t, 5*time.Second, "b queued on the two servers that answer", func() bool {
		n := h.queuedOn(t, el)
		return n[0] == 2 && n[1] == 2
	})
	resigned := time.Now()
	electortest.Resign(t, ra.Term)
	rb := electortest.MustLead(t, cb, faultTTL, "b")
	if took := rb.At.Sub(resigned); took >= call {
		t.Fatalf("b led %s after a resigned, with one server black-holed: as long as a request's timeout (%s)", took, call)
	} else {
		t.Logf("handover with one server black-holed: %s", took.Round(time.Millisecond))
	}
	electortest.Resign(t, rb.Term)
}

// TestOwnMessageWakesNobody: a join that reaches a server before the
// candidates ahead of it names it the head there, in a message its own
// step published. That tells the candidate nothing its step's reply did
// not, and must not wake it: under load, joins of a crowd reach the
// servers in different orders, and the crowd suite saw candidates woken
// that never led.
func TestOwnMessageWakesNobody(t *testing.T) {
	h := newHarness(t, 3)
	el := faultElection(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b, ps := h.proxied(t, el, "b")
	ps[0].Cut() // b reaches servers 1 and 2 only
	cb := electortest.Campaign(ctx, b)
	queuedOn := func(i int) int64 {
		n, err := h.clis[i].ZCard(context.Background(), keysFor(el).queue).Result()
		if err != nil {
			t.Fatalf("count the queue on server %d: %v", i, err)
		}
		return n
	}
	electortest.Eventually(t, 5*faultTTL, "b queued on servers 1 and 2", func() bool {
		return queuedOn(1) == 1 && queuedOn(2) == 1
	})
	c := h.candidate(t, el, "c") // after b: behind it in the order
	// c listens on server 0 before it joins (its campaign waits for a
	// majority of its subscriptions only), so that its own message reaches it.
	if _, err := c.Leader(ctx); err != nil && !errors.Is(err, elector.ErrNoLeader) {
		t.Fatalf("c's leader view: %v", err)
	}
	electortest.Eventually(t, 5*faultTTL, "c subscribed on server 0", func() bool {
		n, err := h.clis[0].PubSubNumSub(context.Background(), keysFor(el).channel).Result()
		return err == nil && n[keysFor(el).channel] == 1
	})
	cc := electortest.Campaign(ctx, c)
	electortest.Eventually(t, 5*faultTTL, "c queued on every server", func() bool {
		return queuedOn(0) == 1 && queuedOn(1) == 2 && queuedOn(2) == 2
	})
	// On server 0, c's own join named c the head. Its message arrives
	// within milliseconds; watch for a second (a stability check, not a
	// synchronisation).
	hold := time.Now().Add(time.Second)
	for time.Now().Before(hold) {
		if w := c.Wakeups(); w != 0 {
			t.Fatalf("c was woken %d times by its own join's message", w)
		}
		time.Sleep(10 * time.Millisecond)
	}
	electortest.StillWaiting(t, cc, "c")
	ps[0].Heal()
	rb := electortest.MustLead(t, cb, 5*faultTTL, "b")
	electortest.Resign(t, rb.Term)
	electortest.Resign(t, electortest.MustLead(t, cc, 5*faultTTL, "c").Term)
}
