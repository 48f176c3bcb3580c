package redlock

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/faultproxy"
	"github.com/electd/electd/internal/testenv"
)

// harness runs the conformance and lock suites against n real redis-server
// processes, independent of one another. Restart restarts every one empty.
// A candidate to be cut off dials every server through a fault proxy of
// its own; the Link cuts them all.
type harness struct {
	srvs []*testenv.Redis
	clis []*redis.Client // for Queued and the fault tests
}

func newHarness(t testing.TB, n int) *harness {
	t.Helper()
	h := &harness{}
	for range n {
		s := testenv.StartRedis(t)
		h.srvs = append(h.srvs, s)
		h.clis = append(h.clis, s.Client(t))
	}
	return h
}

func (h *harness) addrs() []string {
	var a []string
	for _, s := range h.srvs {
		a = append(a, s.Addr())
	}
	return a
}

// New dials every server (c.StoreAddr is Addr, or a list of proxies
// joined by commas from NewCuttable).
func (h *harness) New(t testing.TB, c electortest.Candidate) elector.Locker {
	t.Helper()
	hosts := h.addrs()
	if c.StoreAddr != h.Addr() {
		hosts = strings.Split(c.StoreAddr, ",")
	}
	return electortest.DialURL(t, Backend, "redlock://"+strings.Join(hosts, ","), c.Candidate)
}

func (h *harness) Addr() string { return h.srvs[0].Addr() }

func (h *harness) Restart(t testing.TB) {
	t.Helper()
	for _, s := range h.srvs {
		s.Restart(t)
	}
}

// Queued is the number of entries every server holds for election when
// they agree, else -1: a candidate counts once it is queued on every
// server (so that a handover reaches it on every server the leaver holds),
// and is gone once it is gone from every one. (Observe may still see
// "none" between the two: see "Handover" in the package documentation.)
func (h *harness) Queued(t testing.TB, election string) int {
	t.Helper()
	count := -2
	for _, c := range h.clis {
		n, err := c.ZCard(context.Background(), keysFor(election).queue).Result()
		if err != nil {
			t.Fatalf("count the queue on %s: %v", c.Options().Addr, err)
		}
		switch {
		case count == -2:
			count = int(n)
		case count != int(n):
			return -1
		}
	}
	return count
}

func (h *harness) NewCuttable(t testing.TB, c electortest.Candidate) (elector.Locker, electortest.Link) {
	t.Helper()
	ps, addrs := h.proxies(t)
	c.StoreAddr = strings.Join(addrs, ",")
	return h.New(t, c), &links{ps: ps}
}

// proxies starts a fault proxy in front of every server, and returns the
// proxies and their addresses, both in server order.
func (h *harness) proxies(t testing.TB) ([]*faultproxy.Proxy, []string) {
	var ps []*faultproxy.Proxy
	var addrs []string
	for _, s := range h.srvs {
		p := faultproxy.Start(t, s.Addr())
		ps = append(ps, p)
		addrs = append(addrs, p.Addr())
	}
	return ps, addrs
}

// links cuts and heals a set of proxies together.
type links struct {
	mu sync.Mutex
	ps []*faultproxy.Proxy
}

func (l *links) Cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.ps {
		p.Cut()
	}
}

func (l *links) Heal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.ps {
		p.Heal()
	}
}

func TestConformance3(t *testing.T) { electortest.Run(t, newHarness(t, 3)) }
func TestConformance5(t *testing.T) { electortest.Run(t, newHarness(t, 5)) }
func TestLock3(t *testing.T)        { electortest.RunLock(t, newHarness(t, 3)) }
func TestLock5(t *testing.T)        { electortest.RunLock(t, newHarness(t, 5)) }

func (h *harness) Capabilities() electortest.Capabilities {
	return electortest.Capabilities{NoSemaphore: "a semaphore over a quorum is not sound (TestSlotsRefused)"}
}

// serverClient dials addr as electd does (requests bounded by their context).
func serverClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newElector makes an Elector for election on the given addresses (the
// servers themselves, or proxies in front of them, in server order).
func newElector(t testing.TB, addrs []string, election, id string, ttl time.Duration) *Elector {
	t.Helper()
	var servers []Server
	for _, a := range addrs {
		servers = append(servers, Server{Addr: a, Client: serverClient(t, a)})
	}
	e, err := New(Config{Servers: servers, Candidate: elector.Candidate{
		Election: election, ID: id, Timing: elector.Timing{TTL: ttl}, Logger: electortest.Logger(),
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// pastEpoch makes every server record its epoch (born) and waits one TTL,
// so that the servers grant from now on.
func pastEpoch(t testing.TB, e *Elector) {
	t.Helper()
	ctx := context.Background()
	for i := range e.cfg.Servers {
		if _, err := e.step(ctx, i, "leave", "nobody#0", "", 0, time.Time{}, false); err != nil {
			t.Fatalf("server %d: %v", i, err)
		}
	}
	time.Sleep(e.cfg.Timing.TTL + 50*time.Millisecond)
}

// mustStep runs one step on server i, claiming. Where a fault needs a
// precise moment (a request that arrives after its context timed out, as
// TCP delivers a request written to a connection the client has since
// given up on once a partition heals), a test replays the late request
// with mustStep at the moment it lands: the server cannot tell it from the
// original, since a step's effect depends only on its arguments.
func mustStep(t testing.TB, e *Elector, i int, mode, entry, ord string, commit uint64, since time.Time) stepReply {
	t.Helper()
	r, err := e.step(context.Background(), i, mode, entry, ord, commit, since, true)
	if err != nil {
		t.Fatalf("step %s on server %d: %v", mode, i, err)
	}
	return r
}

// statuses sums up a round's answers for a failure message.
func statuses(res []result) string {
	var s []string
	for i, r := range res {
		if r.err != nil {
			s = append(s, fmt.Sprintf("s%d:err(%v)", i, r.err))
			continue
		}
		s = append(s, fmt.Sprintf("s%d:%s/mine=%d", i, r.r.status, r.r.mine))
	}
	return strings.Join(s, " ")
}

// termOn reads server i's term hash: the holder entry and its token.
func (h *harness) termOn(t testing.TB, election string, i int) (entry, token string) {
	t.Helper()
	v, err := h.clis[i].HMGet(context.Background(), keysFor(election).term, "entry", "token").Result()
	if err != nil {
		t.Fatalf("read the term on server %d: %v", i, err)
	}
	entry, _ = v[0].(string)
	token, _ = v[1].(string)
	return entry, token
}
