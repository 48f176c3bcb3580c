package kit

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/electd/electd/internal/faultproxy"
	"github.com/electd/electd/internal/testenv"
)

// Link is how one electd process reaches the store, which a test can cut
// (a black hole, like a partition: connections stay open and nothing
// arrives) and heal. Start the process with URL as its --store and
// SysProcAttr (nil for a proxy) as its start's.
//
// For a store of one server it is a TCP fault proxy of its own. For a
// Redlock quorum, whose client dials every server it is given, it is a TCP
// fault proxy of its own in front of each server (Proxies, in the order of
// the quorum's servers), and URL names the proxies: Cut and Heal act on
// them all, and a test may cut, delay or reset some of them only. For a
// topology, whose client dials whatever nodes the store names (Sentinel's
// master, a cluster's nodes) past any proxy, or all of them (an etcd
// cluster's members), it is a kernel filter: the process runs with a group
// id of its own, and Cut adds an nftables rule that drops every packet a
// socket of that group sends to the topology's client ports; Heal removes
// it. That needs root and nft (Debian's nftables): a missing nft skips the
// test, or fails it when $CI is set.
type Link struct {
	URL         string
	SysProcAttr *syscall.SysProcAttr
	// Proxies are the link's fault proxies: the one of a single server, one
	// per server of a Redlock quorum (in its order); nil for a kernel
	// filter.
	Proxies   []*faultproxy.Proxy
	cut, heal func()
}

// Cut black-holes the link.
func (l *Link) Cut() { l.cut() }

// Heal lets it through again.
func (l *Link) Heal() { l.heal() }

// Link returns a new link to s for one electd process; it is removed when t
// ends.
func (s *Store) Link(t testing.TB) *Link {
	t.Helper()
	if s.Proxyable() {
		px := faultproxy.Start(t, s.Addr)
		return &Link{URL: s.URL(px.Addr()), Proxies: []*faultproxy.Proxy{px}, cut: px.Cut, heal: px.Heal}
	}
	if s.Redlock != nil {
		var pxs []*faultproxy.Proxy
		var addrs []string
		for _, a := range s.Redlock.Addrs() {
			px := faultproxy.Start(t, a)
			pxs, addrs = append(pxs, px), append(addrs, px.Addr())
		}
		each := func(f func(*faultproxy.Proxy)) func() {
			return func() {
				for _, px := range pxs {
					f(px)
				}
			}
		}
		return &Link{URL: testenv.RedlockURL(addrs), Proxies: pxs,
			cut: each((*faultproxy.Proxy).Cut), heal: each((*faultproxy.Proxy).Heal)}
	}
	nft := needNft(t)
	f := &groupFilter{t: t, nft: nft, gid: 100000 + rand.IntN(1<<30), ports: s.ports()}
	t.Cleanup(f.healNow)
	return &Link{
		URL: s.DirectURL(),
		// uid 0 keeps root's capabilities (pidns containment needs them).
		SysProcAttr: &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 0, Gid: uint32(f.gid), NoSetGroups: true}},
		cut:         f.cutNow, heal: f.healNow,
	}
}

// ports are the client ports of every server of a topology.
func (s *Store) ports() []string {
	var addrs []string
	switch {
	case s.Sentinel != nil:
		for _, n := range append(s.Sentinel.Nodes(), s.Sentinel.Sentinels()...) {
			addrs = append(addrs, n.Addr())
		}
	case s.Cluster != nil:
		for _, n := range s.Cluster.Nodes() {
			addrs = append(addrs, n.Addr())
		}
	case s.EtcdCluster != nil:
		addrs = s.EtcdCluster.Endpoints() // client ports; peer traffic is the members' own
	}
	var ports []string
	for _, a := range addrs {
		ports = append(ports, a[strings.LastIndex(a, ":")+1:])
	}
	return ports
}

func needNft(t testing.TB) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("cutting one electd off a topology needs root (an nftables rule); CI runs as root")
	}
	nft, err := exec.LookPath("nft")
	if err != nil {
		msg := "kit: nft not found (apt-get install -y nftables): cannot cut one electd off a topology"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip("SKIP (loud): " + msg)
	}
	return nft
}

// groupFilter drops what sockets of group gid send to ports on loopback,
// while cut, in an nftables table of its own.
type groupFilter struct {
	t     testing.TB
	nft   string
	gid   int
	ports []string

	mu  sync.Mutex
	cut bool
}

func (f *groupFilter) table() string { return "electd_cut_" + strconv.Itoa(f.gid) }

func (f *groupFilter) cutNow() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cut {
		return
	}
	script := fmt.Sprintf(`add table inet %[1]s
add chain inet %[1]s out { type filter hook output priority 0; policy accept; }
add rule inet %[1]s out meta skgid %[2]d ip daddr 127.0.0.1 tcp dport { %[3]s } drop
`, f.table(), f.gid, strings.Join(f.ports, ", "))
	f.run(script)
	f.cut = true
}

func (f *groupFilter) healNow() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.cut {
		return
	}
	f.run("delete table inet " + f.table() + "\n")
	f.cut = false
}

func (f *groupFilter) run(script string) {
	cmd := exec.Command(f.nft, "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		f.t.Errorf("kit: nft -f - (%s): %v: %s", strings.TrimSpace(script), err, out)
	}
}
