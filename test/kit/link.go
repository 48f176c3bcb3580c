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
)

// Link is how one electd process reaches the store, which a test can cut
// (a black hole, like a partition: connections stay open and nothing
// arrives) and heal. Start the process with Dial (its --store URL, flags
// and environment) and SysProcAttr (nil for proxies) as its start's.
//
// Which of the two it is, the store's Reach says. For a store of one
// server it is a TCP fault proxy of its own. For a Redlock quorum, whose
// client dials every server it is given, it is a TCP fault proxy of its
// own in front of each server (Proxies, in the order of the quorum's
// servers), and the URL names the proxies: Cut and Heal act on them all,
// and a test may cut, delay or reset some of them only. For a topology,
// whose client dials whatever nodes the store names (Sentinel's master, a
// cluster's nodes) past any proxy, or all of them (an etcd cluster's
// members), it is a kernel filter: the process runs with a group
// id of its own, and Cut adds an nftables rule that drops every packet a
// socket of that group sends to the topology's client ports; Heal removes
// it. That needs root and nft (Debian's nftables): a missing nft skips the
// test, or fails it when $CI is set.
type Link struct {
	Dial
	SysProcAttr *syscall.SysProcAttr
	// Proxies are the link's fault proxies: the one of a single server, one
	// per server of a Redlock quorum (in its order); nil for a kernel
	// filter.
	Proxies   []*faultproxy.Proxy
	cut, heal func()
	// pin, unpin: a kernel filter's (see Pin); nil for proxies.
	pin   func(addr string)
	unpin func()
}

// Cut black-holes the link.
func (l *Link) Cut() { l.cut() }

// Heal lets it through again.
func (l *Link) Heal() { l.heal() }

// Pin makes a topology's node at addr (one of its client addresses, e.g.
// an etcd member's endpoint) the only one the process reaches: an nftables
// rule resets every connection its sockets hold or open to the topology's
// other client ports (each is reset at the next segment it sends; a
// connection attempt is refused at once), so that a client that balances
// over the nodes it is connected to sends everything to addr. Only for a
// kernel filter (a topology); it composes with Cut, which drops everything
// while it lasts. Unpin removes the rule; the client reconnects to the
// others as its own backoff allows.
func (l *Link) Pin(addr string) {
	if l.pin == nil {
		panic("kit: Pin on a link of fault proxies; pin a topology's kernel filter")
	}
	l.pin(addr)
}

// Unpin lets the process reach every node again (no-op if not pinned).
func (l *Link) Unpin() {
	if l.unpin != nil {
		l.unpin()
	}
}

// Link returns a new link to s for one electd process; it is removed when t
// ends.
func (s *Store) Link(t testing.TB) *Link {
	t.Helper()
	r := s.Reach()
	if len(r.Addrs) > 0 {
		var pxs []*faultproxy.Proxy
		var addrs []string
		for _, a := range r.Addrs {
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
		return &Link{Dial: s.Dial(addrs), Proxies: pxs, cut: each((*faultproxy.Proxy).Cut), heal: each((*faultproxy.Proxy).Heal)}
	}
	nft := needNft(t)
	f := &groupFilter{t: t, nft: nft, gid: 100000 + rand.IntN(1<<30), ports: r.Ports}
	t.Cleanup(f.healNow)
	t.Cleanup(f.unpinNow)
	return &Link{
		Dial: s.Direct(),
		// uid 0 keeps root's capabilities (pidns containment needs them).
		SysProcAttr: &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 0, Gid: uint32(f.gid), NoSetGroups: true}},
		cut:         f.cutNow, heal: f.healNow, pin: f.pinNow, unpin: f.unpinNow,
	}
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

	mu     sync.Mutex
	cut    bool
	pinned bool
}

func (f *groupFilter) table() string { return "electd_cut_" + strconv.Itoa(f.gid) }

// pinTable is Pin's table, apart from Cut's: either can be removed alone.
func (f *groupFilter) pinTable() string { return "electd_pin_" + strconv.Itoa(f.gid) }

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

// pinNow resets what sockets of group gid send to every port but addr's
// (replacing an earlier pin).
func (f *groupFilter) pinNow(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	keep := addr[strings.LastIndex(addr, ":")+1:]
	var others []string
	for _, p := range f.ports {
		if p != keep {
			others = append(others, p)
		}
	}
	if len(others) == len(f.ports) {
		f.t.Errorf("kit: pin to %s: not one of the topology's client ports %v", addr, f.ports)
		return
	}
	script := ""
	if f.pinned {
		script = "delete table inet " + f.pinTable() + "\n"
	}
	f.pinned = false
	if len(others) > 0 {
		script += fmt.Sprintf(`add table inet %[1]s
add chain inet %[1]s out { type filter hook output priority 0; policy accept; }
add rule inet %[1]s out meta skgid %[2]d ip daddr 127.0.0.1 tcp dport { %[3]s } reject with tcp reset
`, f.pinTable(), f.gid, strings.Join(others, ", "))
		f.pinned = true
	}
	if script != "" {
		f.run(script)
	}
}

func (f *groupFilter) unpinNow() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.pinned {
		return
	}
	f.run("delete table inet " + f.pinTable() + "\n")
	f.pinned = false
}

func (f *groupFilter) run(script string) {
	cmd := exec.Command(f.nft, "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		f.t.Errorf("kit: nft -f - (%s): %v: %s", strings.TrimSpace(script), err, out)
	}
}
