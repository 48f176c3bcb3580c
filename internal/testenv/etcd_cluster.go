package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/electd/electd/internal/faultproxy"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// The cluster's raft timing, in milliseconds. etcd's defaults are 100 and
// 1000; on these 2-core machines, with three members and the race detector
// in the test binary, 50 and 500 elect in well under a second and saw no
// spurious election.
const (
	etcdClusterHeartbeat = 50
	etcdClusterElection  = 500
	etcdClusterSize      = 3
)

// EtcdCluster is a three-member etcd cluster run as child processes on
// loopback, each member with its own data dir, client port and peer port.
// Clients dial members directly; peer traffic goes through a fault proxy
// per directed link (member → member), so Partition cuts one member off from
// both others, in both directions, while clients still reach it. Every
// process is killed in t.Cleanup; logs are at level warn.
type EtcdCluster struct {
	members []*EtcdMember
	admin   *clientv3.Client // testenv's own, for Status
	fsync   bool             // etcd's default; else --unsafe-no-fsync

	mu    sync.Mutex
	links [etcdClusterSize][etcdClusterSize]*faultproxy.Proxy // [from][to]
	cut   [etcdClusterSize]bool

	// pids holds each member's last pid, recorded at its first probe, for
	// the fronts to tell which member dialed them.
	pids [etcdClusterSize]atomic.Int64
}

// EtcdMember is one member of an EtcdCluster. Kill, Stop and Start (from
// lifecycle) act on this process alone; Start brings it back with the same
// data dir and ports, and it rejoins the cluster. Start waits only until
// the member listens for clients; WaitHealthy waits until it follows the
// leader again.
type EtcdMember struct {
	lifecycle
	c          *EtcdCluster
	index      int
	name       string
	dataDir    string
	clientPort int
	peerPort   int // its own listener; peers dial front instead
	front      *peerFront
}

// StartEtcdCluster starts the cluster on free loopback ports with fresh data
// dirs and waits until it is healthy (WaitHealthy). A missing binary skips
// the test (fails it when $CI is set).
//
// The members run with --unsafe-no-fsync: with every suite's cluster and
// servers on the 2-core CI machine at once, fsync of the raft log made
// commits take up to a second and heartbeats late, which tests nothing of
// electd. What a member writes still reaches the page cache, so a member
// (or all three) killed and started again keeps its data. Benchmarks that
// report a cluster's figures use StartDurableEtcdCluster.
func StartEtcdCluster(t testing.TB) *EtcdCluster {
	t.Helper()
	return startEtcdCluster(t, false)
}

// StartDurableEtcdCluster is StartEtcdCluster with etcd's default fsync of
// every raft log write, as production runs it.
func StartDurableEtcdCluster(t testing.TB) *EtcdCluster {
	t.Helper()
	return startEtcdCluster(t, true)
}

func startEtcdCluster(t testing.TB, fsync bool) *EtcdCluster {
	t.Helper()
	var candidates []string
	if root, err := ModuleRoot(); err == nil {
		candidates = append(candidates, filepath.Join(root, "bin", "etcd"))
	}
	bin := binary(t, "ELECTD_ETCD_BIN", "etcd", candidates, etcdHow)
	dir := t.TempDir()
	c := &EtcdCluster{fsync: fsync}
	token := fmt.Sprintf("testenv-%d-%d", os.Getpid(), etcdSeq.Add(1))
	t.Cleanup(c.closeLinks) // last: after the members are killed
	for i := range etcdClusterSize {
		m := &EtcdMember{
			c:       c,
			index:   i,
			name:    fmt.Sprintf("%s-m%d", token, i),
			dataDir: filepath.Join(dir, fmt.Sprintf("m%d", i), "data"),
		}
		if err := os.MkdirAll(filepath.Dir(m.dataDir), 0o755); err != nil {
			t.Fatalf("testenv: %v", err)
		}
		front, err := newPeerFront(func(conn net.Conn) (string, error) { return c.route(conn, m.index) })
		if err != nil {
			t.Fatalf("testenv: %v", err)
		}
		m.front = front
		m.srv = &server{
			name:    fmt.Sprintf("etcd m%d", i),
			bin:     bin,
			logPath: filepath.Join(filepath.Dir(m.dataDir), "etcd.log"),
			probe:   m.probe,
		}
		t.Cleanup(func() { m.srv.cleanup(t) })
		c.members = append(c.members, m)
	}
	initial := c.initialCluster()
	for _, m := range c.members {
		m.srv.args = func() []string { return m.args(token, initial) }
	}
	for _, m := range c.members {
		// A member is ready when it serves clients (probe); the cluster
		// needs all three before it has a leader.
		firstStart(t, m.srv, func() error { return c.pickPorts(m) })
	}
	admin, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: probeTimeout, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("testenv: etcd client: %v", err)
	}
	t.Cleanup(func() { _ = admin.Close() }) // first: before the members
	c.admin = admin
	c.WaitHealthy(t)
	return c
}

// pickPorts chooses m's client and peer ports, empties its data dir (a
// failed try may have left one) and points the links into m at its new
// peer port.
func (c *EtcdCluster) pickPorts(m *EtcdMember) error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	m.clientPort, m.peerPort = ports[0], ports[1]
	if err := os.RemoveAll(m.dataDir); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for from := range etcdClusterSize {
		if from == m.index {
			continue
		}
		if old := c.links[from][m.index]; old != nil {
			_ = old.Close()
		}
		p, err := faultproxy.New("127.0.0.1:" + strconv.Itoa(m.peerPort))
		if err != nil {
			return err
		}
		if c.cut[from] || c.cut[m.index] {
			p.Cut()
		}
		c.links[from][m.index] = p
	}
	return nil
}

func (c *EtcdCluster) closeLinks() {
	for _, m := range c.members {
		m.front.Close()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, row := range c.links {
		for _, p := range row {
			if p != nil {
				_ = p.Close()
			}
		}
	}
}

// route returns where the front of member to forwards conn: the link proxy
// from the member that dialed it.
func (c *EtcdCluster) route(conn net.Conn, to int) (string, error) {
	pids := make([]int, etcdClusterSize)
	for i := range pids {
		pids[i] = int(c.pids[i].Load())
	}
	from, err := socketOwner(conn, pids)
	if err != nil {
		return "", err
	}
	switch {
	case from < 0:
		return "", fmt.Errorf("peer connection to m%d from %v: not a member's", to, conn.RemoteAddr())
	case from == to:
		// A member asking its own advertised peer URL (etcd does at
		// start): no link between members, so nothing to cut.
		return "127.0.0.1:" + strconv.Itoa(c.members[to].peerPort), nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.links[from][to]
	if p == nil {
		return "", fmt.Errorf("m%d has no peer port yet", to)
	}
	return p.Addr(), nil
}

func (c *EtcdCluster) initialCluster() string {
	var parts []string
	for _, m := range c.members {
		parts = append(parts, m.name+"=http://"+m.front.Addr())
	}
	return strings.Join(parts, ",")
}

func (m *EtcdMember) args(token, initial string) []string {
	client := "http://" + m.Endpoint()
	args := []string{
		"--name", m.name,
		"--data-dir", m.dataDir,
		"--listen-client-urls", client,
		"--advertise-client-urls", client,
		"--listen-peer-urls", "http://127.0.0.1:" + strconv.Itoa(m.peerPort),
		"--initial-advertise-peer-urls", "http://" + m.front.Addr(),
		"--initial-cluster", initial,
		"--initial-cluster-state", "new",
		"--initial-cluster-token", token,
		"--heartbeat-interval", strconv.Itoa(etcdClusterHeartbeat),
		"--election-timeout", strconv.Itoa(etcdClusterElection),
		"--log-level", "warn",
	}
	if !m.c.fsync {
		args = append(args, "--unsafe-no-fsync")
	}
	return args
}

// probe records pid for the fronts, then succeeds when pid itself listens
// on the client port. That is all it can ask: until the cluster has a
// leader, etcd accepts client connections but answers nothing, not even
// /version, and a member is probed before its peers run. WaitHealthy asks
// the rest.
func (m *EtcdMember) probe(pid int) error {
	m.c.pids[m.index].Store(int64(pid))
	inode, err := tcpInode(m.clientPort, 0)
	if err != nil {
		return err
	}
	if !holdsSocket(pid, inode) {
		return fmt.Errorf("client port %d is not etcd pid %d's", m.clientPort, pid)
	}
	return nil
}

// Endpoint returns the member's client address, "127.0.0.1:PORT".
func (m *EtcdMember) Endpoint() string { return "127.0.0.1:" + strconv.Itoa(m.clientPort) }

// Index returns the member's position in Members().
func (m *EtcdMember) Index() int { return m.index }

// DataDir returns the member's data directory, kept across restarts.
func (m *EtcdMember) DataDir() string { return m.dataDir }

// Endpoints returns every member's client address, in Members() order.
func (c *EtcdCluster) Endpoints() []string {
	var out []string
	for _, m := range c.members {
		out = append(out, m.Endpoint())
	}
	return out
}

// Members returns the three members.
func (c *EtcdCluster) Members() []*EtcdMember { return c.members }

// URL returns electd's --store URL of the cluster: etcd://H1:P1,H2:P2,H3:P3.
func (c *EtcdCluster) URL() string { return "etcd://" + strings.Join(c.Endpoints(), ",") }

// Client returns a client of the members given by index (all when none
// are), closed in t.Cleanup: before the members are killed when made with
// the t of StartEtcdCluster or a subtest.
func (c *EtcdCluster) Client(t testing.TB, members ...int) *clientv3.Client {
	t.Helper()
	eps := c.Endpoints()
	if len(members) > 0 {
		eps = nil
		for _, i := range members {
			eps = append(eps, c.members[i].Endpoint())
		}
	}
	return dialEtcd(t, clientv3.Config{Endpoints: eps})
}

// Status returns member i's own view (Maintenance.Status): its id, the raft
// leader it follows (0: none), term and index. It needs no quorum.
func (c *EtcdCluster) Status(ctx context.Context, i int) (*clientv3.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	st, err := c.admin.Status(ctx, c.members[i].Endpoint())
	if err != nil {
		return nil, fmt.Errorf("status of m%d: %w", i, err)
	}
	return st, nil
}

// Leader returns the index of the raft leader the running members agree on,
// waiting (up to 30 s) for WaitHealthy's condition.
func (c *EtcdCluster) Leader(t testing.TB) int {
	t.Helper()
	var leader int
	waitUntil(t, topologyTimeout, "etcd cluster leader", func(ctx context.Context) error {
		var err error
		leader, err = c.healthy(ctx)
		return err
	})
	return leader
}

// WaitHealthy waits until every running member answers Status and all of
// them name the same raft leader, one of them. A partitioned member names
// none (measured: its leader is 0 within about a second of Partition), so
// WaitHealthy and Leader fail while one is cut off; use Status.
func (c *EtcdCluster) WaitHealthy(t testing.TB) { t.Helper(); c.Leader(t) }

// healthy checks WaitHealthy's condition and returns the leader's index.
func (c *EtcdCluster) healthy(ctx context.Context) (int, error) {
	ids := map[uint64]int{}
	var leaders []uint64
	for i, m := range c.members {
		if m.Pid() == 0 {
			continue
		}
		st, err := c.Status(ctx, i)
		if err != nil {
			return -1, err
		}
		ids[st.Header.MemberId] = i
		leaders = append(leaders, st.Leader)
	}
	if len(leaders) == 0 {
		return -1, errors.New("no member running")
	}
	for _, l := range leaders {
		if l == 0 || l != leaders[0] {
			return -1, fmt.Errorf("members report leaders %x", leaders)
		}
	}
	i, ok := ids[leaders[0]]
	if !ok {
		return -1, fmt.Errorf("members report leader %x, not a running member", leaders[0])
	}
	return i, nil
}

// Partition cuts member i off from both other members, in both directions:
// its peer links hold every byte silent (see faultproxy.Proxy.Cut).
// Clients still reach it.
func (c *EtcdCluster) Partition(i int) { c.setCut(i, true) }

// Heal restores member i's peer links; held bytes are delivered. A link
// between i and a member that is itself partitioned stays cut.
func (c *EtcdCluster) Heal(i int) { c.setCut(i, false) }

func (c *EtcdCluster) setCut(i int, cut bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut[i] = cut
	for j := range etcdClusterSize {
		if j == i {
			continue
		}
		for _, p := range []*faultproxy.Proxy{c.links[i][j], c.links[j][i]} {
			if cut || !c.cut[j] {
				if cut {
					p.Cut()
				} else {
					p.Heal()
				}
			}
		}
	}
}

// ResetPeerLinks aborts every connection on member i's peer links, in
// both directions (faultproxy.Proxy.Reset: an RST to both ends). Bytes a
// Partition held on them are dropped, as a real partition drops packets
// and the members' connections time out; the members dial again at once
// (a link that is cut holds the new connections until Heal).
func (c *EtcdCluster) ResetPeerLinks(i int) {
	c.mu.Lock()
	var ps []*faultproxy.Proxy
	for j := range etcdClusterSize {
		if j != i {
			ps = append(ps, c.links[i][j], c.links[j][i])
		}
	}
	c.mu.Unlock()
	for _, p := range ps {
		if p != nil {
			p.Reset()
		}
	}
}

// Kill SIGKILLs every member.
func (c *EtcdCluster) Kill(t testing.TB) {
	t.Helper()
	killEach(t, c.members)
}

// Start starts every stopped member again, on its data dir and ports, and
// waits until the cluster is healthy: a full restart keeps the data.
func (c *EtcdCluster) Start(t testing.TB) {
	t.Helper()
	startStopped(t, c.members)
	c.WaitHealthy(t)
}

// SetPeerDelay delays every byte between member i and both other members
// by d, one way, in both directions (faultproxy.Proxy.SetDelay on i's four
// peer links); zero ends the delay. The delay outlasts restarts of the
// members (their links stay), and composes with Partition: a cut link holds
// its bytes whatever the delay. Clients still reach i at once.
func (c *EtcdCluster) SetPeerDelay(i int, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for j := range etcdClusterSize {
		if j != i {
			c.links[i][j].SetDelay(d)
			c.links[j][i].SetDelay(d)
		}
	}
}
