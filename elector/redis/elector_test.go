package redis

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/elector/internal/redistest"
	"github.com/electd/electd/internal/faultproxy"
)

func TestConfigValidation(t *testing.T) {
	cli := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer cli.Close()
	ok := Config{Client: cli, Candidate: elector.Candidate{Election: "jobs", ID: "host-1", Timing: testTiming()}}
	for _, tc := range []struct {
		field string
		mod   func(*Config)
	}{
		{"store", func(c *Config) { c.Client = nil }},
		{"election", func(c *Config) { c.Election = "" }},
		{"election", func(c *Config) { c.Election = "a{b}" }},
		{"election", func(c *Config) { c.Election = "a b" }},
		{"election", func(c *Config) { c.Election = "a\x01" }},
		{"election", func(c *Config) { c.Election = strings.Repeat("x", 129) }},
		{"id", func(c *Config) { c.ID = "" }},
		{"id", func(c *Config) { c.ID = "h}" }},
		{"id", func(c *Config) { c.ID = "h\n" }},
		{"advertise", func(c *Config) { c.Address = "http://x\n" }},
		{"ttl", func(c *Config) { c.Timing.TTL = 50 * time.Millisecond }},
		{"renew-interval", func(c *Config) { c.Timing.RenewInterval = time.Second }},
	} {
		cfg := ok
		tc.mod(&cfg)
		_, err := New(cfg)
		var ce *elector.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%s: New = %v, want a ConfigError for %q", tc.field, err, tc.field)
		}
	}
	e, err := New(ok)
	if err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := e.Campaign(context.Background()); !errors.Is(err, elector.ErrClosed) {
		t.Fatalf("Campaign after Close = %v, want ErrClosed", err)
	}
}

func TestLoneCandidateLeads(t *testing.T) {
	srv, cli := startRedis(t)
	a := newElector(t, srv.Addr(), "lone", "a")
	start := time.Now()
	r := electortest.MustLead(t, electortest.Campaign(context.Background(), a), 5*testTTL, "a")
	// A fresh election grants nothing during its first TTL (see doc.go).
	if waited := r.At.Sub(start); waited < testTTL {
		t.Fatalf("first term granted after %s, before one TTL", waited)
	}
	term := r.Term
	if term.Token == 0 || term.Leader.ID != "a" || term.Leader.Address != "http://a.test" || term.Leader.Since.IsZero() {
		t.Fatalf("term leader = %+v", term.Leader)
	}
	if _, err := a.Campaign(context.Background()); !errors.Is(err, errBusy) {
		t.Fatalf("second Campaign while leading = %v, want errBusy", err)
	}
	l, err := a.Leader(context.Background())
	if err != nil || l != term.Leader {
		t.Fatalf("Leader = %+v, %v; want %+v", l, err, term.Leader)
	}
	electortest.Eventually(t, 3*testTTL, "renewals to carry the term past one TTL", func() bool {
		return term.ValidUntil().After(r.At.Add(testTTL))
	})
	if err := term.Err(); err != nil {
		t.Fatalf("term ended while renewing: %v", err)
	}
	electortest.Resign(t, term)
	if !errors.Is(term.Err(), elector.ErrResigned) {
		t.Fatalf("term.Err = %v after resign", term.Err())
	}
	electortest.Eventually(t, 2*time.Second, "no leader", func() bool {
		_, err := a.Leader(context.Background())
		return errors.Is(err, elector.ErrNoLeader)
	})
	if _, entries := electionKeys(t, cli, "lone"); len(entries) != 0 {
		t.Fatalf("entries left after resign: %v", entries)
	}
}

func TestFIFOOrderAndTokens(t *testing.T) {
	srv, cli := startRedis(t)
	ctx := context.Background()
	var chans []<-chan electortest.Result
	for i, id := range []string{"a", "b", "c"} {
		chans = append(chans, electortest.Campaign(ctx, newElector(t, srv.Addr(), "fifo", id)))
		waitQueued(t, cli, "fifo", i+1)
	}
	var last uint64
	for i, id := range []string{"a", "b", "c"} {
		r := electortest.MustLead(t, chans[i], 5*testTTL, id)
		if r.Term.Leader.ID != id {
			t.Fatalf("leader %s, want %s", r.Term.Leader.ID, id)
		}
		for _, ch := range chans[i+1:] {
			electortest.StillWaiting(t, ch, "a later candidate")
		}
		if r.Term.Token <= last {
			t.Fatalf("%s: token %d not above %d", id, r.Term.Token, last)
		}
		last = r.Term.Token
		electortest.Resign(t, r.Term)
	}
}

func TestResignHandsOverPromptly(t *testing.T) {
	srv, cli := startRedis(t)
	ctx := context.Background()
	a, b := newElector(t, srv.Addr(), "handover", "a"), newElector(t, srv.Addr(), "handover", "b")
	ra := electortest.MustLead(t, electortest.Campaign(ctx, a), 5*testTTL, "a")
	var lat []time.Duration
	for round := range 5 {
		cb := electortest.Campaign(ctx, b)
		waitQueued(t, cli, "handover", 2)
		wb := b.Wakeups()
		start := time.Now()
		electortest.Resign(t, ra.Term)
		rb := electortest.MustLead(t, cb, testTTL, "b")
		lat = append(lat, rb.At.Sub(start))
		if rb.Term.Token <= ra.Term.Token {
			t.Fatalf("token %d after %d", rb.Term.Token, ra.Term.Token)
		}
		if w := b.Wakeups() - wb; w != 1 {
			t.Errorf("round %d: successor woke %d times, want 1", round, w)
		}
		a, b, ra = b, a, rb
	}
	slices.Sort(lat)
	t.Logf("handover after resign: min %s median %s max %s", lat[0], lat[len(lat)/2], lat[len(lat)-1])
	if lat[len(lat)/2] > testTTL/4 {
		t.Fatalf("median handover %s: not driven by the resignation", lat[len(lat)/2])
	}
	electortest.Resign(t, ra.Term)
}

// TestCutOffLeaderEndsFirst: a leader cut off from Redis closes Done, and
// its ValidUntil passes, before the successor's Campaign returns.
func TestCutOffLeaderEndsFirst(t *testing.T) {
	srv, cli := startRedis(t)
	p := faultproxy.Start(t, srv.Addr())
	ctx := context.Background()
	a := newElector(t, p.Addr(), "cutoff", "a")
	b := newElector(t, srv.Addr(), "cutoff", "b")
	ra := electortest.MustLead(t, electortest.Campaign(ctx, a), 5*testTTL, "a")
	cb := electortest.Campaign(ctx, b)
	waitQueued(t, cli, "cutoff", 2)

	doneAt := make(chan time.Time, 1)
	go func() { <-ra.Term.Done(); doneAt <- time.Now() }()
	cut := time.Now()
	p.Cut()
	rb := electortest.MustLead(t, cb, 4*testTTL, "b")
	var aDone time.Time
	select {
	case aDone = <-doneAt:
	default:
		t.Fatalf("b leads %s after the cut while a's term is open", rb.At.Sub(cut))
	}
	vu := ra.Term.ValidUntil()
	if !aDone.Before(rb.At) || !vu.Before(rb.At) {
		t.Fatalf("a done at %s, valid until %s, b granted at %s (after the cut)", aDone.Sub(cut), vu.Sub(cut), rb.At.Sub(cut))
	}
	if !errors.Is(ra.Term.Err(), elector.ErrLeaseExpired) {
		t.Fatalf("cut-off term ended with %v", ra.Term.Err())
	}
	if rb.Term.Token <= ra.Term.Token {
		t.Fatalf("token %d after %d", rb.Term.Token, ra.Term.Token)
	}
	t.Logf("ttl %s: a done %s after the cut (valid until %s), b leads %s after the cut, %s after a's deadline",
		testTTL, aDone.Sub(cut).Round(time.Millisecond), vu.Sub(cut).Round(time.Millisecond),
		rb.At.Sub(cut).Round(time.Millisecond), rb.At.Sub(vu).Round(time.Millisecond))
	p.Heal()
	// Healed, a can campaign again and queues behind b.
	ca := electortest.Campaign(ctx, a)
	waitQueued(t, cli, "cutoff", 2)
	electortest.StillWaiting(t, ca, "a")
	electortest.Resign(t, rb.Term)
	electortest.MustLead(t, ca, testTTL, "a")
}

// TestRestartEmptyUnderLeader: Redis restarts with no data under a leader.
// The leader's term ends before anyone else's begins, and tokens grow.
func TestRestartEmptyUnderLeader(t *testing.T) {
	srv, cli := startRedis(t)
	ctx := context.Background()
	_, _, ra, cb := leaderAndWaiter(ctx, t, srv, cli, "restart")
	doneAt := make(chan time.Time, 1)
	go func() { <-ra.Term.Done(); doneAt <- time.Now() }()

	srv.Kill(t)
	starting := time.Now() // the new state appears after this: no server runs now
	srv.Start(t)
	back := time.Now()
	rb := electortest.MustLead(t, cb, 5*testTTL, "b")
	select {
	case d := <-doneAt:
		if !d.Before(rb.At) || !ra.Term.ValidUntil().Before(rb.At) {
			t.Fatalf("a ended at %s, b began at %s (after restart)", d.Sub(back), rb.At.Sub(back))
		}
		t.Logf("a ended %s after the restart (%v), b leads %s after it", d.Sub(back).Round(time.Millisecond), ra.Term.Err(), rb.At.Sub(back).Round(time.Millisecond))
	default:
		t.Fatalf("b leads while a's term is open")
	}
	if !errors.Is(ra.Term.Err(), elector.ErrLeaseLost) && !errors.Is(ra.Term.Err(), elector.ErrLeaseExpired) {
		t.Fatalf("a's term ended with %v", ra.Term.Err())
	}
	if rb.Term.Token <= ra.Term.Token {
		t.Fatalf("token %d after restart, %d before", rb.Term.Token, ra.Term.Token)
	}
	// Measured from before the new server started: a script (a's
	// renewal) may see the new state before Start has returned.
	if rb.At.Sub(starting) < testTTL {
		t.Fatalf("a term was granted %s after the new server started, before one TTL", rb.At.Sub(starting))
	}
	electortest.Resign(t, rb.Term)
}

func TestCancelledCampaignLeavesNoKeys(t *testing.T) {
	srv, cli := startRedis(t)
	ctx, cancel := context.WithCancel(context.Background())
	_, _, ra, cb := leaderAndWaiter(ctx, t, srv, cli, "cancel")
	cancel()
	select {
	case r := <-cb:
		if !errors.Is(r.Err, context.Canceled) {
			t.Fatalf("cancelled campaign = %v, %v", r.Term, r.Err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("campaign did not return after cancel")
	}
	keys, entries := electionKeys(t, cli, "cancel")
	for _, e := range entries {
		if strings.HasPrefix(e, "b#") {
			t.Fatalf("cancelled candidate left %q behind (keys %v)", e, keys)
		}
	}
	electortest.Resign(t, ra.Term)
	keys, entries = electionKeys(t, cli, "cancel")
	if len(entries) != 0 {
		t.Fatalf("entries after resign: %v", entries)
	}
	slices.Sort(keys)
	t.Logf("keys left by an idle election: %v", keys)
}

// TestIdleFollowerCommands: a waiting candidate costs one script call per
// renewal interval, plus a constant for its subscription.
func TestIdleFollowerCommands(t *testing.T) {
	srv, cli := startRedis(t)
	ctx := context.Background()
	a, _, ra, cb := leaderAndWaiter(ctx, t, srv, cli, "idle")
	if err := cli.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	const window = 10 * testTTL / 5 // ten renewal intervals
	time.Sleep(window)              // measuring a rate over a window, not synchronising
	stats := redistest.CommandStats(t, cli)
	elapsed := time.Since(start)
	electortest.StillWaiting(t, cb, "b")
	inScripts := map[string]bool{}
	for _, c := range []string{"time", "info", "hmget", "hset", "hget", "hdel", "zadd", "zrem", "zrange", "zrangebyscore", "zscore", "zrank", "exists", "get", "set", "incr", "del", "publish"} {
		inScripts[c] = true
	}
	top := 0
	for cmd, n := range stats {
		if !inScripts[cmd] && cmd != "config|resetstat" {
			top += n
		}
	}
	top-- // our own INFO commandstats
	renewals := int(elapsed / a.cfg.Timing.RenewInterval)
	// Two candidates (leader and follower) renewing, plus pings.
	if bound := 2*(renewals+1) + 4; top > bound {
		t.Fatalf("%d commands in %s (%v); want at most %d", top, elapsed, stats, bound)
	}
	t.Logf("leader+follower: %d commands in %s (%d renewal intervals): %v", top, elapsed.Round(time.Millisecond), renewals, stats)
	electortest.Resign(t, ra.Term)
	electortest.MustLead(t, cb, testTTL, "b").Term.Resign(ctx)
}

func TestObserveSeesEveryChange(t *testing.T) {
	srv, _ := startRedis(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := newElector(t, srv.Addr(), "observe", "w")
	var mu sync.Mutex
	var seen []string
	ch := w.Observe(ctx)
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		for l := range ch {
			mu.Lock()
			seen = append(seen, l.ID)
			mu.Unlock()
		}
	}()
	expect := func(want ...string) {
		t.Helper()
		electortest.Eventually(t, 3*testTTL, "observed "+strings.Join(want, ","), func() bool {
			mu.Lock()
			defer mu.Unlock()
			return slices.Equal(seen, want)
		})
	}
	expect("")
	a, b := newElector(t, srv.Addr(), "observe", "a"), newElector(t, srv.Addr(), "observe", "b")
	ra := electortest.MustLead(t, electortest.Campaign(ctx, a), 5*testTTL, "a")
	expect("", "a")
	electortest.Resign(t, ra.Term)
	expect("", "a", "")
	rb := electortest.MustLead(t, electortest.Campaign(ctx, b), 5*testTTL, "b")
	expect("", "a", "", "b")
	ca := electortest.Campaign(ctx, a)
	electortest.Eventually(t, 3*testTTL, "a queued", func() bool { return queued(t, w.cfg.Client, "observe") == 2 })
	electortest.Resign(t, rb.Term)
	ra = electortest.MustLead(t, ca, testTTL, "a")
	expect("", "a", "", "b", "a")
	// A crashed leader publishes nothing: the view notices at its deadline.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	expect("", "a", "", "b", "a", "")
	if l, err := w.Leader(ctx); !errors.Is(err, elector.ErrNoLeader) {
		t.Fatalf("Leader = %+v, %v; want ErrNoLeader", l, err)
	}
	cancel()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Observe channel not closed after ctx ended")
	}
}

// TestCloseEndsTermAndHandsOver: Close ends the term and removes the entry,
// so the successor leads at once rather than one TTL later.
func TestCloseEndsTermAndHandsOver(t *testing.T) {
	srv, cli := startRedis(t)
	ctx := context.Background()
	a, _, ra, cb := leaderAndWaiter(ctx, t, srv, cli, "close")
	start := time.Now()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(ra.Term.Err(), elector.ErrClosed) {
		t.Fatalf("term.Err after Close = %v", ra.Term.Err())
	}
	rb := electortest.MustLead(t, cb, testTTL/2, "b")
	t.Logf("handover after Close: %s", rb.At.Sub(start))
	electortest.Resign(t, rb.Term)
}

func TestStoreDownThenUp(t *testing.T) {
	srv, _ := startRedis(t)
	inst := &countingInstrument{}
	a := newElectorWith(t, Config{Client: newClient(t, srv.Addr()), Candidate: elector.Candidate{Election: "down", ID: "a", Timing: testTiming(), Instrument: inst}})
	srv.Stop(t)
	ca := electortest.Campaign(context.Background(), a)
	electortest.Eventually(t, 5*time.Second, "store errors to be reported", func() bool { return inst.n.Load() > 0 })
	electortest.StillWaiting(t, ca, "a")
	srv.Start(t)
	r := electortest.MustLead(t, ca, 5*testTTL, "a")
	electortest.Resign(t, r.Term)
}

func TestPermanentErrors(t *testing.T) {
	srv, cli := startRedis(t)
	ctx := context.Background()
	if err := cli.Do(ctx, "ACL", "SETUSER", "noscript", "on", ">pw", "~*", "&*", "+@all", "-evalsha", "-eval").Err(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ user, pass string }{{"noscript", "pw"}, {"noscript", "wrong"}} {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: tc.user, Password: tc.pass, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		e := newElectorWith(t, Config{Client: c, Candidate: elector.Candidate{Election: "perm", ID: "a", Timing: testTiming()}})
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := e.Campaign(cctx)
		cancel()
		var se *elector.StoreError
		if !errors.As(err, &se) || !se.Permanent {
			t.Fatalf("%s/%s: Campaign = %v, want a permanent StoreError", tc.user, tc.pass, err)
		}
		t.Logf("%s/%s: %v", tc.user, tc.pass, err)
	}
}
