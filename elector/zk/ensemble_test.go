package zk_test

// Ensembles for the adversarial tests: testenv's, or three members this
// package starts itself (ownMember) with a zoo.cfg testenv does not write
// (another syncLimit, per-member timeouts, quorum links through relays);
// their roles; and the steps the races on them share (a's node watched,
// b queued, times relative to the fault).

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/faultproxy"
	"github.com/electd/electd/internal/testenv"
)

// zkMember is an ensemble member: testenv's, or one this package starts
// with a zoo.cfg of its own (ownMember).
type zkMember interface {
	Addr() string
	Pid() int
	LogPath() string
	Mode() string
}

func testenvEnsemble(t *testing.T) []zkMember {
	var ms []zkMember
	for _, m := range testenv.StartZKEnsemble(t).Members() {
		ms = append(ms, m)
	}
	return ms
}

// roles waits (a minute at most) until the ensemble of members has a
// leader and two followers, and returns them.
func roles(t *testing.T, members []zkMember) (lead, f, g zkMember) {
	t.Helper()
	electortest.Eventually(t, time.Minute, "an ensemble leader", func() bool {
		lead, f, g = nil, nil, nil
		for _, m := range members {
			switch m.Mode() {
			case "leader":
				lead = m
			case "follower":
				if f == nil {
					f = m
				} else {
					g = m
				}
			}
		}
		return lead != nil && f != nil && g != nil
	})
	return lead, f, g
}

// ownMember is a ZooKeeper server this package starts itself, to choose
// its zoo.cfg (testenv's syncLimit is 5, its members alike).
type ownMember struct {
	dir  string
	port int
	cmd  *exec.Cmd
}

func (m *ownMember) Addr() string    { return "127.0.0.1:" + strconv.Itoa(m.port) }
func (m *ownMember) Pid() int        { return m.cmd.Process.Pid }
func (m *ownMember) LogPath() string { return filepath.Join(m.dir, "zookeeper.log") }
func (m *ownMember) Mode() string {
	c, err := net.DialTimeout("tcp", m.Addr(), time.Second)
	if err != nil {
		return ""
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return ""
	}
	b, _ := io.ReadAll(c)
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Mode: "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// ownMembers are ms as zkMembers.
func ownMembers(ms []*ownMember) []zkMember {
	var members []zkMember
	for _, m := range ms {
		members = append(members, m)
	}
	return members
}

// ownJava returns java and Debian's zookeeper jar, as testenv runs them,
// or skips the test.
func ownJava(t *testing.T) (java, jar string) {
	t.Helper()
	jar = "/usr/share/java/zookeeper.jar"
	java, err := exec.LookPath("java")
	if _, serr := os.Stat(jar); err != nil || serr != nil {
		t.Skip("no java or zookeeper jar")
	}
	return java, jar
}

// ownPorts are n free loopback ports: each is listened on, and all are
// closed once all are chosen.
func ownPorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		if err := ln.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return ports
}

// startOwnMember starts member id (QuorumPeerMain, as testenv does) in a
// directory of its own, serving clients on port, with tickTime 200ms,
// initLimit 10 and syncLimit, then the lines of cfg (its server.N lines
// among them). It is killed at cleanup (its process then: restartWith
// replaces it).
func startOwnMember(t *testing.T, java, jar string, id, port, syncLimit int, cfg []string) *ownMember {
	t.Helper()
	m := &ownMember{dir: t.TempDir(), port: port}
	if err := os.MkdirAll(filepath.Join(m.dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(m.dir, "data", "myid"), []byte(strconv.Itoa(id)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lines := append([]string{"tickTime=200", "initLimit=10", "syncLimit=" + strconv.Itoa(syncLimit),
		"dataDir=" + filepath.Join(m.dir, "data"), "clientPort=" + strconv.Itoa(port), "clientPortAddress=127.0.0.1",
		"admin.enableServer=false", "4lw.commands.whitelist=*"}, cfg...)
	cfgPath := filepath.Join(m.dir, "zoo.cfg")
	if err := os.WriteFile(cfgPath, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(m.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	m.cmd = exec.Command(java, "-Xmx256m", "-Dzookeeper.log.dir="+m.dir, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"-cp", jar+":/usr/share/java/slf4j-simple.jar", "org.apache.zookeeper.server.quorum.QuorumPeerMain", cfgPath)
	m.cmd.Stdout, m.cmd.Stderr = logf, logf
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.cmd.Process.Kill(); err != nil {
			t.Logf("kill member %d: %v", id, err)
		}
		_ = m.cmd.Wait() // killed: its exit status says so
		if err := logf.Close(); err != nil {
			t.Logf("close member %d's log: %v", id, err)
		}
	})
	return m
}

// startOwnEnsemble starts three members with the given syncLimit, each
// with extra[i] (i from 0) after its own lines, talking to each other
// directly.
func startOwnEnsemble(t *testing.T, syncLimit int, extra map[int][]string) []*ownMember {
	t.Helper()
	java, jar := ownJava(t)
	ports := ownPorts(t, 9)
	var servers []string
	for j := range 3 {
		servers = append(servers, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", j+1, ports[3*j+1], ports[3*j+2]))
	}
	var ms []*ownMember
	for i := range 3 {
		cfg := append(append([]string(nil), extra[i]...), servers...)
		ms = append(ms, startOwnMember(t, java, jar, i+1, ports[3*i], syncLimit, cfg))
	}
	return ms
}

// startEnsemble starts three members with tickTime 200ms and the given
// syncLimit, as testenv does (Debian's jar, QuorumPeerMain).
func startEnsemble(t *testing.T, syncLimit int) ([]zkMember, string) {
	t.Helper()
	ms := startOwnEnsemble(t, syncLimit, nil)
	cfgDesc := fmt.Sprintf("own zoo.cfg: tickTime=200 initLimit=10 syncLimit=%d (F gives up on its leader after %s)", syncLimit, time.Duration(syncLimit)*200*time.Millisecond)
	return ownMembers(ms), cfgDesc
}

// startMembersWith starts three members (tickTime 200ms, syncLimit 5, as
// testenv) with extra[i] appended to member i's zoo.cfg.
func startMembersWith(t *testing.T, extra map[int][]string) []*ownMember {
	t.Helper()
	return startOwnEnsemble(t, 5, extra)
}

// zoneURL is a's URL in a zone partition: it names all three members, as
// a real deployment's would, but a's links to lead and g go through fault
// proxies closed from the start (connections refused, not black-holed:
// go-zookeeper waits 10·recvTimeout, ≈27s at a 4s timeout, for a
// handshake's answer before it tries the next server), so that a's
// client can only ever reach f.
func zoneURL(t *testing.T, lead, f, g zkMember) string {
	pl, pg := faultproxy.Start(t, lead.Addr()), faultproxy.Start(t, g.Addr())
	_ = pl.Close() // the refusal
	_ = pg.Close()
	return "zk://" + pl.Addr() + "," + f.Addr() + "," + pg.Addr()
}

// leadThenQueue has a lead in election (within 30s: an ensemble's members
// may still be settling), fails the test unless a's term runs on the
// session timeout ttl (hint: why it might not), and has b campaign and
// queue behind it, as a client of its own on addrs sees. It returns a's
// grant, b's campaign and that client.
func leadThenQueue(t *testing.T, a, b elector.Elector, election string, ttl time.Duration, hint string, addrs []string) (electortest.Result, <-chan electortest.Result, *gozk.Conn) {
	t.Helper()
	ctx := context.Background()
	ra := electortest.MustLead(t, electortest.Campaign(ctx, a), 30*time.Second, "a")
	t.Logf("a leads: token %#x, timing %s", ra.Term.Token, ra.Term.Timing())
	if got := ra.Term.Timing().TTL; got != ttl {
		t.Fatalf("a negotiated %s, not %s%s", got, ttl, hint)
	}
	cb := electortest.Campaign(ctx, b)
	qc := client(t, addrs)
	waitInLine(t, qc, election, 2, "b queued")
	return ra, cb, qc
}

// waitInLine waits (10s at most) until c sees n candidates' nodes in
// election; what names the wait.
func waitInLine(t *testing.T, c *gozk.Conn, election string, n int, what string) {
	t.Helper()
	electortest.Eventually(t, 10*time.Second, what, func() bool {
		names, _, err := c.Children("/electd/elections/" + election)
		return err == nil && len(names) == n
	})
}

// watchFirst watches the first node (in sequence order) under dir and
// returns when it is deleted (closed without a time otherwise).
func watchFirst(t *testing.T, qc *gozk.Conn, dir string) <-chan time.Time {
	t.Helper()
	names, _, err := qc.Children(dir)
	if err != nil {
		t.Fatal(err)
	}
	var first string
	for _, n := range names {
		if first == "" || n[len(n)-10:] < first[len(first)-10:] {
			first = n
		}
	}
	_, _, watch, err := qc.ExistsW(dir + "/" + first)
	if err != nil {
		t.Fatal(err)
	}
	deleted := make(chan time.Time, 1)
	go func() {
		if ev := <-watch; ev.Type == gozk.EventNodeDeleted {
			deleted <- time.Now()
		}
		close(deleted)
	}()
	return deleted
}

// seenWithin is the time on ch, or zero when none comes within wait.
func seenWithin(ch <-chan time.Time, wait time.Duration) time.Time {
	select {
	case at := <-ch:
		return at
	case <-time.After(wait):
		return time.Time{}
	}
}

// relTo renders times relative to origin (the fault), "never" for zero.
func relTo(origin time.Time) func(time.Time) string {
	return func(x time.Time) string {
		if x.IsZero() {
			return "never"
		}
		return x.Sub(origin).Round(time.Millisecond).String()
	}
}

// rolesF1 is roles with member 1 as F (the member whose links the relayed
// ensembles carry), skipping the test when member 1 leads.
func rolesF1(t *testing.T, members []zkMember) (lead, f, g zkMember) {
	t.Helper()
	lead, f, g = roles(t, members)
	if memberID(t, f) != 1 {
		f, g = g, f
	}
	if memberID(t, f) != 1 {
		t.Skipf("member 1 leads (%s): it is F in these tests", lead.Addr())
	}
	return lead, f, g
}
