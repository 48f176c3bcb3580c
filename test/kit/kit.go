// Package kit is the test kit of the suites that run electd as processes
// against real store servers (test/e2e, test/lock, test/torture): the
// TestMain that builds the binaries, the table of backends and how to start
// a server of each, and the loop that runs a suite on every backend in
// parallel; an electd process with its log and HTTP API (Electd), the
// scenario that e2e's and lock's harnesses embed (Scenario), and the checks
// of the record log they share.
//
// Servers come from internal/testenv, and so does its rule for a missing
// binary: the test is skipped loudly, or fails when $CI is set.
package kit

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electd/electd/internal/testenv"
)

// Main is a suite's TestMain: it builds electd and the recorder into bin
// (see Build; name names the suite, env is the prefix of its variables),
// runs the tests and exits.
func Main(m *testing.M, name, env string, bin *Binaries) {
	os.Exit(buildAndRun(m, name, env, bin))
}

func buildAndRun(m *testing.M, name, env string, bin *Binaries) int {
	b, err := Build(name, env)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return 1
	}
	defer b.Remove()
	*bin = *b
	return m.Run()
}

// Backend is a store kind electd supports.
type Backend struct {
	// Name is the subtest's name, and the scheme of electd's --store but
	// for etcd-cluster (whose scheme is etcd) and redlockN (redlock).
	Name  string
	start func(t *testing.T) *Store
}

// Backends are every store kind, in the order the suites run them.
var Backends = []Backend{
	{Name: "etcd", start: func(t *testing.T) *Store {
		e := testenv.StartEtcd(t)
		return &Store{Name: "etcd", Addr: e.Endpoint(), Etcd: e, srv: e}
	}},
	{Name: "redis", start: func(t *testing.T) *Store {
		r := testenv.StartRedis(t)
		return &Store{Name: "redis", Addr: r.Addr(), Redis: r, srv: r}
	}},
}

// Topologies are the Redis Sentinel and Redis Cluster topologies, a
// three-member etcd cluster and a Redlock quorum of three independent
// redis-servers (internal/testenv): stores of several servers that one
// per-node proxy cannot stand in front of (see Store.Proxyable).
// Selected runs them with Backends.
var Topologies = []Backend{
	{Name: "redis+sentinel", start: func(t *testing.T) *Store {
		// Three replicas, moved one at a time in a failover: the old
		// master keeps one for a while (torture's planned-failover).
		s := testenv.StartRedisSentinelWith(t, testenv.SentinelOptions{Replicas: 3, ParallelSyncs: 1})
		return &Store{Name: "redis+sentinel", Sentinel: s, srv: s}
	}},
	{Name: "redis+cluster", start: func(t *testing.T) *Store {
		c := testenv.StartRedisCluster(t)
		return &Store{Name: "redis+cluster", Cluster: c, srv: c}
	}},
	{Name: "etcd-cluster", start: func(t *testing.T) *Store {
		c := testenv.StartEtcdCluster(t)
		return &Store{Name: "etcd-cluster", EtcdCluster: c, srv: c}
	}},
	Redlock(RedlockServers),
}

// RedlockServers is how many independent servers the "redlock" topology
// runs: the fewest a quorum takes (with three, one may fail).
const RedlockServers = 3

// Redlock is the redlock topology of n independent redis-servers
// (testenv.StartRedlock), named "redlock" for RedlockServers and
// "redlockN" otherwise; electd's --store is redlock://S1,…,Sn. The
// backend refuses --slots > 1 (Store.SlotsRefused).
func Redlock(n int) Backend {
	name := "redlock"
	if n != RedlockServers {
		name += strconv.Itoa(n)
	}
	return Backend{Name: name, start: func(t *testing.T) *Store {
		r := testenv.StartRedlock(t, n)
		return &Store{Name: name, Redlock: r, srv: redlockAll{r},
			SlotsRefused: "a semaphore over a quorum is not sound: the redlock backend refuses --slots > 1 by design (exit 2 naming --slots)"}
	}}
}

// redlockAll kills and starts every server of a quorum.
type redlockAll struct{ r *testenv.Redlock }

func (a redlockAll) Kill(t testing.TB)  { t.Helper(); a.r.KillAll(t) }
func (a redlockAll) Start(t testing.TB) { t.Helper(); a.r.StartAll(t) }

// Select returns the backends named in list, comma-separated: those of
// Backends and of Topologies, and redlockN (N ≥ 1): a Redlock quorum of N
// servers (electd refuses fewer than three, with exit 2).
func Select(list string) ([]Backend, error) {
	all := append(slices.Clone(Backends), Topologies...)
	var out []Backend
	for name := range strings.SplitSeq(list, ",") {
		name = strings.TrimSpace(name)
		i := slices.IndexFunc(all, func(b Backend) bool { return b.Name == name })
		n, err := strconv.Atoi(strings.TrimPrefix(name, "redlock"))
		switch {
		case i >= 0:
			out = append(out, all[i])
		case strings.HasPrefix(name, "redlock") && err == nil && n >= 1:
			out = append(out, Redlock(n)) // redlock5: a quorum of five
		case name != "":
			var names []string
			for _, b := range all {
				names = append(names, b.Name)
			}
			return nil, fmt.Errorf("unknown backend %q (want one of %s, or redlockN for a quorum of N servers)", name, strings.Join(names, ", "))
		}
	}
	return out, nil
}

// notByDefault are the topologies Selected leaves out unless they are
// named: the three-member etcd cluster. With two `make test` runs at once
// on 2 cores, its lease renewals (a follower forwards them to the raft
// leader through testenv's peer proxies) stalled for over a second at a
// time and the process suites' leaders lost their 2 s terms; one run at a
// time passed. The elector-level suites and the torture run still cover
// the cluster by default; E2E_BACKENDS=etcd-cluster (LOCK_BACKENDS)
// runs these suites on it.
var notByDefault = map[string]bool{"etcd-cluster": true}

// Selected returns the backends named by $env (as Select reads them), or,
// when it is unset, all of Backends and Topologies but notByDefault; a bad
// name fails t.
func Selected(t *testing.T, env string) []Backend {
	t.Helper()
	list, ok := os.LookupEnv(env)
	if !ok {
		var all []Backend
		for _, b := range append(slices.Clone(Backends), Topologies...) {
			if !notByDefault[b.Name] {
				all = append(all, b)
			}
		}
		return all
	}
	bs, err := Select(list)
	if err != nil {
		t.Fatalf("$%s: %v", env, err)
	}
	return bs
}

// Start starts a server of b on free loopback ports; it is killed when t
// ends. Must run on t's goroutine.
func (b Backend) Start(t *testing.T) *Store { t.Helper(); return b.start(t) }

// Store is one running server of a backend, or one topology of servers.
type Store struct {
	Name string // the backend's
	// Addr is host:port of the server, which a proxy can stand in front
	// of; empty for a topology (see Proxyable).
	Addr        string
	Etcd        *testenv.Etcd        // the server when Name is "etcd", else nil
	Redis       *testenv.Redis       // the server when Name is "redis", else nil
	Sentinel    *testenv.Sentinel    // the topology when Name is "redis+sentinel", else nil
	Cluster     *testenv.Cluster     // the topology when Name is "redis+cluster", else nil
	EtcdCluster *testenv.EtcdCluster // the cluster when Name is "etcd-cluster", else nil
	Redlock     *testenv.Redlock     // the quorum's servers when Name is "redlock" (or "redlockN"), else nil
	// SlotsRefused, if not empty, says why the backend refuses --slots > 1
	// (electd exits 2 naming --slots): the scenarios of a semaphore check
	// that refusal instead.
	SlotsRefused string

	srv interface {
		Kill(t testing.TB)
		Start(t testing.TB)
	}
}

// Proxyable reports whether one TCP proxy to Addr can carry a client's
// whole traffic, so that cutting it cuts that client off alone: true for
// etcd and a single Redis. A Sentinel or Cluster client dials the nodes the
// sentinels or the cluster announce, past any proxy; an etcd cluster's
// client holds connections to all three members (one proxy would cut it off
// from one of them), and so does a Redlock client to every server (its
// Link is a proxy per server).
func (s *Store) Proxyable() bool { return s.Addr != "" }

// URL is electd's --store for addr, a proxy to Addr. Only for a
// Proxyable store; the direct URL of any store is DirectURL.
func (s *Store) URL(addr string) string {
	if !s.Proxyable() {
		panic("kit: " + s.Name + " store behind a proxy: it is not Proxyable")
	}
	return s.Name + "://" + addr
}

// DirectURL is electd's --store for the store itself: the server's, or
// the topology's (redis+sentinel://S1,S2,S3/MASTER, redis+cluster://N1,…,N6,
// etcd://M1,M2,M3, redlock://S1,S2,S3).
func (s *Store) DirectURL() string {
	switch {
	case s.Redlock != nil:
		return s.Redlock.URL()
	case s.Sentinel != nil:
		return s.Sentinel.URL()
	case s.Cluster != nil:
		return s.Cluster.URL()
	case s.EtcdCluster != nil:
		return s.EtcdCluster.URL()
	}
	return s.URL(s.Addr)
}

// RedisClient returns a go-redis client of a Redis store of any kind (a
// plain client, a failover client through the sentinels, a cluster
// client), closed when t ends; nil for etcd of either kind and for a
// Redlock quorum, whose servers are independent (RedisServers).
func (s *Store) RedisClient(t testing.TB) redis.UniversalClient {
	t.Helper()
	switch {
	case s.Redis != nil:
		return s.Redis.Client(t)
	case s.Sentinel != nil:
		return s.Sentinel.Client(t)
	case s.Cluster != nil:
		return s.Cluster.Client(t)
	}
	return nil
}

// RedisServers returns a client of each server that holds a copy of the
// election's state on its own: the one Redis (its client), every server of
// a Redlock quorum, in order; nil for the other stores. Each is closed when
// t ends.
func (s *Store) RedisServers(t testing.TB) []*redis.Client {
	t.Helper()
	switch {
	case s.Redis != nil:
		return []*redis.Client{s.Redis.Client(t)}
	case s.Redlock != nil:
		return s.Redlock.Clients(t)
	}
	return nil
}

// IsEtcd reports whether the store is etcd: one server or the cluster.
func (s *Store) IsEtcd() bool { return s.Etcd != nil || s.EtcdCluster != nil }

// EtcdClient returns a client of an etcd store of either kind (of the one
// server, or of all three members), closed when t ends; nil for Redis.
func (s *Store) EtcdClient(t testing.TB) *clientv3.Client {
	t.Helper()
	switch {
	case s.Etcd != nil:
		return s.Etcd.Client(t)
	case s.EtcdCluster != nil:
		return s.EtcdCluster.Client(t)
	}
	return nil
}

// Kill SIGKILLs the server, or every data node of a topology (the
// sentinels stay up; every member of an etcd cluster; every server of a
// Redlock quorum), and waits until they are gone.
func (s *Store) Kill(t testing.TB) { t.Helper(); s.srv.Kill(t) }

// Start starts a killed server (or the data nodes, or the members) again on
// its address, with its data where the store persists it (etcd of either
// kind does; Redis of every kind comes back empty, a cluster with its slot
// map, a Redlock quorum every server empty), and waits until it is ready (an etcd cluster: until every member
// follows one leader).
func (s *Store) Start(t testing.TB) { t.Helper(); s.srv.Start(t) }

// Run runs fn on each of bs in parallel subtests named after the backend,
// each with a server of its own. A suite's TestBackends runs its scenarios
// in fn, one after another on that one server.
func Run(t *testing.T, bs []Backend, fn func(t *testing.T, s *Store)) {
	for _, b := range bs {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			fn(t, b.Start(t))
		})
	}
}
