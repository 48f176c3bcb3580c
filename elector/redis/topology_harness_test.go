package redis

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/backend"
	"github.com/electd/electd/elector/backend/hosts"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/faultproxy"
	"github.com/electd/electd/internal/testenv"
)

// topologyHarness runs the conformance and lock suites against a real
// Sentinel set-up or Redis Cluster. Candidates dial the topology as electd
// does (DialSentinel, DialCluster); a candidate to be cut off gets the same
// client options with a dialer that sends each of its connections, to the
// sentinels, the master or any node, through a fault proxy of its own.
type topologyHarness struct {
	b        backend.Backend
	url      string
	addr     string                                  // the first host of url
	replicas int                                     // Config.Replicas, as the backend's Dial sets it
	client   func(dial dialer) redis.UniversalClient // production options, with dial
	// sentinels, if not nil, makes Config.Sentinels as the backend's Dial
	// does, with dial.
	sentinels func(dial dialer) *Sentinels
	restart   func(t testing.TB)
	cli       redis.UniversalClient // for Queued
	sentinel  *testenv.Sentinel     // the Sentinel set-up (nil for a Cluster)
}

type dialer func(ctx context.Context, network, addr string) (net.Conn, error)

func sentinelHarness(t *testing.T) *topologyHarness {
	s := testenv.StartRedisSentinel(t)
	return &topologyHarness{
		b:        SentinelBackend,
		url:      sentinelURL(s),
		addr:     s.SentinelAddrs()[0],
		replicas: 1,
		client: func(dial dialer) redis.UniversalClient {
			o := FailoverOptions(s.MasterName(), s.SentinelAddrs())
			o.Dialer = dial
			return redis.NewFailoverClient(o)
		},
		sentinels: func(dial dialer) *Sentinels {
			opts := sentinelOptions(hosts.Endpoint{Hosts: s.SentinelAddrs()})
			for _, o := range opts {
				o.Dialer = dial
			}
			return NewSentinels(s.MasterName(), opts)
		},
		restart:  func(t testing.TB) { s.Kill(t); s.Start(t) },
		cli:      s.Client(t),
		sentinel: s,
	}
}

func clusterHarness(t *testing.T) *topologyHarness {
	c := testenv.StartRedisCluster(t)
	return &topologyHarness{
		b:    ClusterBackend,
		url:  clusterURL(c),
		addr: c.Addrs()[0],
		client: func(dial dialer) redis.UniversalClient {
			o := ClusterOptions(c.Addrs())
			o.Dialer = dial
			return redis.NewClusterClient(o)
		},
		restart: func(t testing.TB) { c.Kill(t); c.Start(t) },
		cli:     c.Client(t),
	}
}

func (h *topologyHarness) New(t testing.TB, c electortest.Candidate) elector.Locker {
	t.Helper()
	conn := electortest.Open(t, h.b, h.url) // closed after the elector (LIFO)
	return h.elector(t, conn.NewElector, c)
}

// NewCuttable makes a candidate whose every connection goes through a fault
// proxy of its own (one per address it dials); the Link cuts them all.
func (h *topologyHarness) NewCuttable(t testing.TB, c electortest.Candidate) (elector.Locker, electortest.Link) {
	t.Helper()
	links := &proxies{by: map[string]*faultproxy.Proxy{}}
	t.Cleanup(links.close)
	cli := h.client(links.dial)
	t.Cleanup(func() { _ = cli.Close() })
	var sen *Sentinels
	if h.sentinels != nil {
		sen = h.sentinels(links.dial)
		t.Cleanup(func() { _ = sen.Close() })
	}
	e := h.elector(t, func(cand elector.Candidate) (elector.Locker, error) {
		return New(Config{Client: cli, Candidate: cand, Replicas: h.replicas, Sentinels: sen})
	}, c)
	return e, links
}

func (h *topologyHarness) elector(t testing.TB, mk func(elector.Candidate) (elector.Locker, error), c electortest.Candidate) elector.Locker {
	t.Helper()
	if c.Logger == nil {
		c.Logger = electortest.Logger()
	}
	e, err := mk(c.Candidate)
	if err != nil {
		t.Fatalf("new %s elector: %v", h.b.Name, err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("close the elector: %v", err)
		}
	})
	return e
}

// Addr is the first address the candidates dial (a sentinel, or a node).
func (h *topologyHarness) Addr() string { return h.addr }

func (h *topologyHarness) Restart(t testing.TB) { t.Helper(); h.restart(t) }

func (h *topologyHarness) Queued(t testing.TB, election string) int {
	t.Helper()
	return queued(t, h.cli, election)
}

// proxies are one candidate's fault proxies, by the address they forward
// to, made as the client first dials each; Cut and Heal apply to all,
// later ones included.
type proxies struct {
	mu     sync.Mutex
	by     map[string]*faultproxy.Proxy
	cut    bool
	closed bool
}

func (p *proxies) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	px, err := p.proxy(addr)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	return d.DialContext(ctx, network, px.Addr())
}

func (p *proxies) proxy(addr string) (*faultproxy.Proxy, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("the test's proxies are closed")
	}
	if px, ok := p.by[addr]; ok {
		return px, nil
	}
	px, err := faultproxy.New(addr)
	if err != nil {
		return nil, err
	}
	if p.cut {
		px.Cut()
	}
	p.by[addr] = px
	return px, nil
}

func (p *proxies) Cut()  { p.each(func(px *faultproxy.Proxy) { px.Cut() }, true) }
func (p *proxies) Heal() { p.each(func(px *faultproxy.Proxy) { px.Heal() }, false) }

func (p *proxies) each(f func(*faultproxy.Proxy), cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	for _, px := range p.by {
		f(px)
	}
}

func (p *proxies) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, px := range p.by {
		_ = px.Close() // a test's proxy; its connections die with it
	}
}

func TestConformanceSentinel(t *testing.T) {
	t.Parallel()
	electortest.Run(t, sentinelHarness(t))
}

func TestConformanceCluster(t *testing.T) {
	t.Parallel()
	electortest.Run(t, clusterHarness(t))
}

func TestLockSentinel(t *testing.T) {
	t.Parallel()
	electortest.RunLock(t, sentinelHarness(t))
}

func TestLockCluster(t *testing.T) {
	t.Parallel()
	electortest.RunLock(t, clusterHarness(t))
}
