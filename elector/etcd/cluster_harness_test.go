package etcd_test

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/elector/etcd"
	"github.com/electd/electd/internal/faultproxy"
	"github.com/electd/electd/internal/testenv"
)

// clusterHarness runs the conformance and lock suites against a real
// three-member etcd cluster (testenv.StartEtcdCluster). Candidates dial
// every member through etcd.Backend, as electd does for
// etcd://m1,m2,m3; a candidate to be cut off dials each member through a
// fault proxy of its own (NewCuttable). Restart kills all three members and
// starts them again on their data dirs.
type clusterHarness struct {
	c   *testenv.EtcdCluster
	cli *clientv3.Client // every member: for Queued
}

func newClusterHarness(t *testing.T) *clusterHarness {
	t.Helper()
	c := testenv.StartEtcdCluster(t)
	return &clusterHarness{c: c, cli: c.Client(t)}
}

var _ electortest.Cutter = (*clusterHarness)(nil)

// Addr is the first member's address; New given it dials all three.
func (h *clusterHarness) Addr() string { return h.c.Endpoints()[0] }

// New makes a candidate that dials every member; a StoreAddr other than
// Addr (a caller's own proxy) is dialed alone.
func (h *clusterHarness) New(t testing.TB, c electortest.Candidate) elector.Locker {
	t.Helper()
	hosts := h.c.Endpoints()
	if c.StoreAddr != "" && c.StoreAddr != h.Addr() {
		hosts = []string{c.StoreAddr}
	}
	return h.dial(t, c.Candidate, hosts...)
}

// dial makes candidate c on a connection of its own to hosts, as electd
// dials etcd://HOSTS.
func (h *clusterHarness) dial(t testing.TB, c elector.Candidate, hosts ...string) elector.Locker {
	t.Helper()
	return electortest.DialURL(t, etcd.Backend, "etcd://"+strings.Join(hosts, ","), c)
}

// NewCuttable makes a candidate that dials each member through a fault
// proxy of its own; the Link cuts and heals all three.
func (h *clusterHarness) NewCuttable(t testing.TB, c electortest.Candidate) (elector.Locker, electortest.Link) {
	t.Helper()
	return h.cuttable(t, c.Candidate)
}

// cuttable is NewCuttable with the proxies, one per member in Members()
// order, for a test to cut or slow one of them.
func (h *clusterHarness) cuttable(t testing.TB, c elector.Candidate) (elector.Locker, memberLinks) {
	t.Helper()
	var links memberLinks
	var hosts []string
	for _, ep := range h.c.Endpoints() {
		p := faultproxy.Start(t, ep) // closed after the candidate (LIFO)
		links = append(links, p)
		hosts = append(hosts, p.Addr())
	}
	return h.dial(t, c, hosts...), links
}

// Restart kills every member and starts them again; Start waits until the
// cluster is healthy.
func (h *clusterHarness) Restart(t testing.TB) {
	t.Helper()
	h.c.Kill(t)
	h.c.Start(t)
}

// Queued counts election's keys. A member without a raft leader refuses
// the read at once (WithRequireLeader), and the client asks another.
func (h *clusterHarness) Queued(t testing.TB, election string) int {
	t.Helper()
	// A loaded cluster may stall for a second or two (a raft election):
	// ask again rather than fail the test on the harness's own read.
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(context.Background()), 5*time.Second)
		resp, err := h.cli.Get(ctx, etcd.DefaultPrefix+election+"/", clientv3WithPrefixCount()...)
		cancel()
		if err == nil {
			return int(resp.Count)
		}
		if time.Now().After(deadline) {
			t.Fatalf("count candidates: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // a retry's backoff, not synchronisation
	}
}

// memberLinks are one candidate's fault proxies, one per member, in
// Members() order. Cut and Heal act on all of them.
type memberLinks []*faultproxy.Proxy

func (l memberLinks) Cut() {
	for _, p := range l {
		p.Cut()
	}
}

func (l memberLinks) Heal() {
	for _, p := range l {
		p.Heal()
	}
}

func TestClusterConformance(t *testing.T) {
	electortest.Run(t, newClusterHarness(t))
}

func TestClusterLockSuite(t *testing.T) {
	electortest.RunLock(t, newClusterHarness(t))
}
