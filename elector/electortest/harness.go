package electortest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/backend"
	"github.com/electd/electd/internal/faultproxy"
)

// Harness gives the suite access to one backend and its real store.
type Harness interface {
	// New returns a candidate of c.Election dialing the store at
	// c.StoreAddr (which may be a fault proxy). The harness closes it, and
	// any client it made, when the test ends.
	New(t testing.TB, c Candidate) elector.Locker
	// Addr is the real store's host:port.
	Addr() string
	// Restart stops the store and starts it again on the same address
	// (with its data where the store persists it).
	Restart(t testing.TB)
	// Queued counts the candidates the store holds for election, leader
	// included, by reading the store directly.
	Queued(t testing.TB, election string) int
}

// Candidate describes one candidate for Harness.New: the candidate, and
// the address of the store (or of a fault proxy in front of it) to dial.
type Candidate struct {
	elector.Candidate
	StoreAddr string
}

var seq atomic.Uint64

// uniqueElection gives every test its own election.
func uniqueElection(t testing.TB) string {
	return fmt.Sprintf("conf-%d-%d", time.Now().UnixNano()%1e9, seq.Add(1))
}

func timing(ttl time.Duration) elector.Timing { return elector.Timing{TTL: ttl} }

// candidate creates a candidate directly on the store.
func candidate(t testing.TB, h Harness, election, id string, ttl time.Duration) elector.Locker {
	return slotted(t, h, election, id, ttl, 1)
}

// slotted creates a candidate of a semaphore of n slots directly on the store.
func slotted(t testing.TB, h Harness, election, id string, ttl time.Duration, n int) elector.Locker {
	return h.New(t, Candidate{StoreAddr: h.Addr(), Candidate: elector.Candidate{
		Election: election, ID: id, Address: "http://" + id + ".test:4040", Timing: timing(ttl), Slots: n}})
}

// Link is one candidate's path to the store, which a test can cut (a black
// hole, like a partition) and heal. A *faultproxy.Proxy is one.
type Link interface {
	Cut()
	Heal()
}

// Cutter is a Harness whose candidates a proxy in front of Addr cannot cut
// off, because their client dials whatever nodes the store names (Redis
// Sentinel's master, a cluster's nodes): it makes a candidate whose every
// connection goes through a Link of its own.
type Cutter interface {
	NewCuttable(t testing.TB, c Candidate) (elector.Locker, Link)
}

// proxied creates a candidate behind its own fault proxy.
func proxied(t testing.TB, h Harness, election, id string, ttl time.Duration) (elector.Locker, Link) {
	return proxiedSlots(t, h, election, id, ttl, 1)
}

// proxiedSlots creates a candidate of a semaphore of n slots behind its own
// fault proxy (or the Cutter's Link).
func proxiedSlots(t testing.TB, h Harness, election, id string, ttl time.Duration, n int) (elector.Locker, Link) {
	c := Candidate{Candidate: elector.Candidate{Election: election, ID: id, Timing: timing(ttl), Slots: n}}
	if cu, ok := h.(Cutter); ok {
		c.StoreAddr = h.Addr()
		return cu.NewCuttable(t, c)
	}
	p := faultproxy.Start(t, h.Addr())
	c.StoreAddr = p.Addr()
	return h.New(t, c), p
}

// waitQueued waits until the store holds n candidates of election. The
// bound is generous: 50 candidates joining a three-member cluster under
// -race on a loaded 2-core machine took over 10 s (seen on the unchanged
// code too); it bounds a set-up, not a property under test.
// A crowd of 50 joins in seconds, but on a loaded machine (two CI runs at
// once, -race) Kubernetes took over 30 s for its 50 tickets: the bound is
// a minute, and its failure says how many were queued last.
func waitQueued(t testing.TB, h Harness, election string, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for last := h.Queued(t, election); last != n; last = h.Queued(t, election) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 1m waiting for %d queued candidates: %d queued", n, last)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, not synchronising on time
	}
}

// observer records what Observe delivers.
type observer struct {
	mu   sync.Mutex
	seen []elector.Leader
}

func observe(ctx context.Context, e elector.Elector) *observer {
	o := &observer{}
	ch := e.Observe(ctx)
	go func() {
		for l := range ch {
			o.mu.Lock()
			o.seen = append(o.seen, l)
			o.mu.Unlock()
		}
	}()
	return o
}

// ids lists the leaders seen, in order; a repeat of the same term (sent
// again with a refined Since) is one entry.
func (o *observer) ids() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var ids []string
	for i, l := range o.seen {
		if i > 0 && l.SameTerm(o.seen[i-1]) {
			continue
		}
		id := l.ID
		if l.IsZero() {
			id = "<none>"
		}
		ids = append(ids, id)
	}
	return ids
}

// String lists every value received, in order, as id/token ("<none>" for
// no leader), marking a repeat of the same term "(refined)": what a failure
// message shows.
func (o *observer) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var b strings.Builder
	for i, l := range o.seen {
		if i > 0 {
			b.WriteByte(' ')
		}
		switch {
		case i > 0 && l.SameTerm(o.seen[i-1]):
			b.WriteString("(refined)")
		case l.IsZero():
			b.WriteString("<none>")
		default:
			fmt.Fprintf(&b, "%s/%d", l.ID, l.Token)
		}
	}
	return "[" + b.String() + "]"
}

func (o *observer) last() (elector.Leader, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.seen) == 0 {
		return elector.Leader{}, false
	}
	return o.seen[len(o.seen)-1], true
}

// Dial is a Harness.New for backend b: it dials c.StoreAddr under b's
// plain scheme as the store package does (b's own Parse, the client
// options electd runs with), makes the candidate on that connection, and
// closes both when the test ends. A candidate without a Logger gets
// Logger().
func Dial(t testing.TB, b backend.Backend, c Candidate) elector.Locker {
	t.Helper()
	for _, s := range b.Schemes {
		if !s.TLS {
			return DialURL(t, b, s.Name+"://"+c.StoreAddr, c.Candidate)
		}
	}
	t.Fatalf("%s has no plain scheme to dial %s with", b.Name, c.StoreAddr)
	return nil
}

// DialURL is Dial for any URL of b (a cluster, or a master found through
// sentinels): Open, then candidate c on that connection, closed when the
// test ends.
func DialURL(t testing.TB, b backend.Backend, url string, c elector.Candidate) elector.Locker {
	t.Helper()
	conn := Open(t, b, url)
	if c.Logger == nil {
		c.Logger = Logger()
	}
	e, err := conn.NewElector(c)
	if err != nil {
		t.Fatalf("new %s elector: %v", b.Name, err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("close the elector: %v", err)
		}
	})
	return e
}

// Open parses url with b's own Parse and dials it with no credentials
// besides the URL's, and Logger(), as the store package does; the
// connection is closed when the test ends (after the electors made on it).
func Open(t testing.TB, b backend.Backend, url string) backend.Conn {
	t.Helper()
	name, rest, _ := strings.Cut(url, "://")
	scheme, ok := b.Scheme(name)
	if !ok {
		t.Fatalf("%s does not take %s", b.Name, url)
	}
	target, err := b.Parse(backend.URL{Scheme: scheme, Rest: rest, Redacted: url})
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	conn, err := target.Dial(context.Background(), backend.Settings{Password: target.Password, Logger: Logger()})
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() {
		if err := conn.Close(); err != nil {
			t.Logf("close the %s connection: %v", b.Name, err)
		}
	})
	return conn
}

// Capabilities says which promises of the suites a backend cannot keep,
// by the nature of its store; the suites skip their tests, saying why. No
// safety assertion is ever among them: a backend without semaphores
// refuses Slots > 1 (its own tests check the refusal), it does not run
// them unsafely.
type Capabilities struct {
	// NoSemaphore: the backend refuses Slots > 1, and why.
	NoSemaphore string
}

// Capable is a Harness whose backend declares Capabilities.
type Capable interface {
	Capabilities() Capabilities
}

func capabilities(h Harness) Capabilities {
	if c, ok := h.(Capable); ok {
		return c.Capabilities()
	}
	return Capabilities{}
}

// test is one test of a suite, run against a harness.
type test struct {
	name string
	fn   func(*testing.T, Harness)
	// semaphore: the test needs Slots > 1.
	semaphore bool
}

func runTests(t *testing.T, h Harness, tests []test) {
	caps := capabilities(h)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.semaphore && caps.NoSemaphore != "" {
				t.Skipf("the backend refuses semaphores: %s", caps.NoSemaphore)
			}
			tc.fn(t, h)
		})
	}
}

// nextToken fails t unless term's fencing token is greater than *last,
// which it then becomes.
func nextToken(t testing.TB, who string, term *elector.Term, last *uint64) {
	t.Helper()
	if term.Token <= *last {
		t.Fatalf("%s: token %d not greater than the previous %d", who, term.Token, *last)
	}
	*last = term.Token
}
