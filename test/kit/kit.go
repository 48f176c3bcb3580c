// Package kit is the test kit of the suites that run electd as processes
// against real store servers (test/e2e, test/lock, test/torture): the
// TestMain that builds the binaries, the table of backends, whose entries
// each start a store and give it to the suites as a Store (Servers: how
// electd reaches it, how one electd is cut off, Kill and Start, what it
// holds), and the loop that runs a suite on every backend in
// parallel; an electd process with its log and HTTP API (Electd), the
// scenario that e2e's and lock's harnesses embed (Scenario), and the checks
// of the record log they share.
//
// Servers come from internal/testenv, and so does its rule for a missing
// binary: the test is skipped loudly, or fails when $CI is set.
package kit

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

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

// Backend is a store kind electd supports: an entry of Backends or
// Topologies, which starts a Store of its kind. A new kind is one entry
// here and a Servers of its own (a file beside etcd.go, redis.go,
// redlock.go); no suite names a kind.
type Backend struct {
	// Name is the subtest's name, and the scheme of electd's --store but
	// for etcd-cluster (whose scheme is etcd), redlockN (redlock) and
	// k8s+client-go (k8s).
	Name  string
	start func(t *testing.T) *Store
}

// Backends are every store kind, in the order the suites run them.
var Backends = []Backend{
	{Name: "etcd", start: func(t *testing.T) *Store {
		e := testenv.StartEtcd(t)
		return &Store{Name: "etcd", Servers: newEtcd(t, e, []string{e.Endpoint()}, Reach{Addrs: []string{e.Endpoint()}}, e.Client)}
	}},
	{Name: "redis", start: func(t *testing.T) *Store {
		r := testenv.StartRedis(t)
		return &Store{Name: "redis", Servers: newRedis(t, r, "redis://"+r.Addr(), Reach{Addrs: []string{r.Addr()}},
			func(t testing.TB) redis.UniversalClient { return r.Client(t) })}
	}},
	{Name: "k8s", start: func(t *testing.T) *Store {
		return &Store{Name: "k8s", SlotsRefused: kubeSlotsRefused, Servers: newKube(t, testenv.StartKube(t))}
	}},
	ZK,
}

const kubeSlotsRefused = "a Lease holds one term: the Kubernetes backend refuses --slots > 1 (exit 2 naming --slots)"

// Topologies are the Redis Sentinel and Redis Cluster topologies, a
// three-member etcd cluster and a Redlock quorum of three independent
// redis-servers (internal/testenv): stores of several servers that one
// per-node proxy cannot stand in front of (see Store.Proxyable); and
// k8s+client-go, the Kubernetes store on Leases a client-go elector shares
// (kubeShared). Selected runs them with Backends.
var Topologies = []Backend{
	{Name: "redis+sentinel", start: func(t *testing.T) *Store {
		// Three replicas, moved one at a time in a failover: the old
		// master keeps one for a while (torture's planned-failover).
		s := testenv.StartRedisSentinelWith(t, testenv.SentinelOptions{Replicas: 3, ParallelSyncs: 1})
		reach := Reach{Ports: nodePorts(append(s.Nodes(), s.Sentinels()...)),
			Why: "its client dials the nodes it is told of, past any proxy"}
		return &Store{Name: "redis+sentinel", Kills: "every data node",
			Servers: newRedis(t, s, s.URL(), reach, s.Client)}
	}},
	{Name: "redis+cluster", start: func(t *testing.T) *Store {
		c := testenv.StartRedisCluster(t)
		reach := Reach{Ports: nodePorts(c.Nodes()), Why: "its client dials the nodes it is told of, past any proxy"}
		return &Store{Name: "redis+cluster", Kills: "every data node",
			Servers: newRedis(t, c, c.URL(), reach, func(t testing.TB) redis.UniversalClient { return c.Client(t) })}
	}},
	{Name: "etcd-cluster", start: func(t *testing.T) *Store {
		c := testenv.StartEtcdCluster(t)
		// Client ports; peer traffic is the members' own.
		reach := Reach{Ports: ports(c.Endpoints()), Why: "its client holds a connection to each of the three members"}
		return &Store{Name: "etcd-cluster", Kills: "every member",
			Servers: newEtcd(t, c, c.Endpoints(), reach, func(t testing.TB) *clientv3.Client { return c.Client(t) })}
	}},
	Redlock(RedlockServers),
	ZKEnsemble,
	{Name: "k8s+client-go", start: func(t *testing.T) *Store {
		// Each scenario's Lease as a client-go elector leaves it, and
		// back to client-go after the scenario (kubeShared).
		return &Store{Name: "k8s+client-go", SlotsRefused: kubeSlotsRefused,
			Servers: &kubeShared{newKube(t, testenv.StartKube(t))}}
	}},
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
		return &Store{Name: name, Kills: "every server", Servers: newRedlock(t, testenv.StartRedlock(t, n)),
			SlotsRefused: "a semaphore over a quorum is not sound: the redlock backend refuses --slots > 1 by design (exit 2 naming --slots)"}
	}}
}

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

// Store is one running server of a backend, or one topology of servers:
// what its entry started, and what the suites do with it (Servers).
type Store struct {
	Name string // the backend's
	// SlotsRefused, if not empty, says why the backend refuses --slots > 1
	// (electd exits 2 naming --slots): the scenarios of a semaphore check
	// that refusal instead.
	SlotsRefused string
	// Kills says what Kill and Start act on when that is more than one
	// server ("every member"), for the notes of a fault; empty for one.
	Kills string
	Servers
}

// Servers is a running store as its entry gives it to the suites. Each
// entry implements it; what only some stores can do is an interface of
// its own (WriteRefuser, Counter), and a scenario written for one kind
// of store (its own faults) gets the testenv value with As.
type Servers interface {
	// Dial is how an electd process reaches the store: directly (addrs
	// nil), or through addrs, one in front of each of Reach().Addrs, in
	// their order.
	Dial(addrs []string) Dial
	// Reach is how one electd process can be cut off from the store
	// (Store.Link).
	Reach() Reach
	// Kill SIGKILLs the server, or every data node of a topology (the
	// sentinels stay up; every member of an etcd cluster; every server of
	// a Redlock quorum), and waits until they are gone.
	Kill(t testing.TB)
	// Start starts a killed server (or the data nodes, or the members)
	// again on its address, with its data where the store persists it
	// (etcd of either kind does; Redis of every kind comes back empty, a
	// cluster with its slot map, a Redlock quorum every server empty), and
	// waits until it is ready (an etcd cluster: until every member follows
	// one leader).
	Start(t testing.TB)
	// Queued counts the candidates the store holds for election; on a
	// Redlock quorum, the most any server holds alive (every server must
	// be clean for 0): those whose lease there has not lapsed by its
	// clock. A failed read fails t.
	Queued(t testing.TB, election string) int
	// LastRun reads the --once-per run record of election (nil when there
	// is none); on a Redlock quorum, the newest any server holds (as
	// electd reads it). A failed read fails t.
	LastRun(t testing.TB, election string) *RunRecord
}

// Dial is how an electd process reaches a store: its --store URL, and the
// flags and environment it needs beside it (none for etcd and Redis).
type Dial struct {
	URL  string
	Args []string // flags beside --store
	Env  []string // KEY=value
}

// Flags are --store URL and Args, for electd's command line.
func (d Dial) Flags() []string { return append([]string{"--store", d.URL}, d.Args...) }

// Reach is how one electd process can be cut off from a store (Link):
// through a TCP fault proxy in front of each of Addrs, when one carries
// all of a client's traffic to that server (one server; each server of a
// Redlock quorum); otherwise (Addrs nil) by a kernel filter on Ports, the
// client ports of every node a client may dial, and Why says why a proxy
// cannot stand in.
type Reach struct {
	Addrs []string
	Ports []string
	Why   string
}

// RunRecord is the --once-per run record as the store holds it (JSON).
type RunRecord struct {
	ID       string    `json:"id"`
	Token    uint64    `json:"fencing_token"`
	Finished time.Time `json:"finished"`
}

// WriteRefuser is a store that can refuse every write for a while, on
// every server that takes them (Redis: maxmemory 1).
type WriteRefuser interface {
	// RefuseWrites makes the store refuse writes until lift is called, and
	// returns the class electd's /healthz gives the refusal. lift may be
	// called more than once. A failure fails t.
	RefuseWrites(t testing.TB) (class string, lift func())
}

// Preparer is a store that prepares each scenario's election before its
// first electd (k8s+client-go: a client-go elector leads the Lease and
// releases it), and checks it after the scenario's electds were killed
// (client-go leads it again).
type Preparer interface {
	// Prepare prepares election and returns the check to run at the end
	// of t, after its electds were killed; a failure fails t.
	Prepare(t *testing.T, election string) (after func())
}

// Counter is a store that counts the requests it serves.
type Counter interface {
	// Counts are the store's own counters so far, by request kind (etcd:
	// grpc_server_started_total by method, from /metrics; Redis: INFO
	// commandstats, scripts' commands included).
	Counts(ctx context.Context) (map[string]int, error)
	// RoundTrips are the clients' requests among the growth d of Counts
	// (Redis: the commands a client sends; the rest ran inside scripts).
	RoundTrips(d map[string]int) int
}

// As returns the testenv value s's entry started (*testenv.Etcd,
// *testenv.Redis, *testenv.Sentinel, *testenv.Cluster,
// *testenv.EtcdCluster, *testenv.Redlock) as a T, and whether it is one:
// for a scenario, or a fault, written for one kind of store.
func As[T any](s *Store) (T, bool) {
	var v T
	st, ok := s.Servers.(interface{ started() any })
	if ok {
		v, ok = st.started().(T)
	}
	return v, ok
}

// Direct is how an electd process reaches the store itself: the server's,
// or the topology's (redis+sentinel://S1,S2,S3/MASTER,
// redis+cluster://N1,…,N6, etcd://M1,M2,M3, redlock://S1,S2,S3).
func (s *Store) Direct() Dial { return s.Dial(nil) }

// Proxyable reports whether one TCP proxy can carry a client's whole
// traffic, so that cutting it cuts that client off alone: true for etcd
// and a single Redis. A Sentinel or Cluster client dials the nodes the
// sentinels or the cluster announce, past any proxy; an etcd cluster's
// client holds connections to all three members (one proxy would cut it off
// from one of them), and so does a Redlock client to every server (its
// Link is a proxy per server).
func (s *Store) Proxyable() bool { return len(s.Reach().Addrs) == 1 }

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

// Test is one scenario of a suite: its subtest's name and what it does on
// a backend's Store.
type Test struct {
	Name string
	Run  func(t *testing.T, s *Store)
}

// RunTests is a suite's TestBackends: it runs every test, one after
// another, against each backend that $<env>_BACKENDS selects (Selected);
// the backends run in parallel, each on its own server (Run).
func RunTests(t *testing.T, env string, tests []Test) {
	Run(t, Selected(t, env+"_BACKENDS"), func(t *testing.T, s *Store) {
		for _, tc := range tests {
			t.Run(tc.Name, func(t *testing.T) { tc.Run(t, s) })
		}
	})
}
