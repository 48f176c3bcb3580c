package zk_test

// Tests of a term's deadline and end (term.go) under faults on a real
// server or ensemble: a follower cut off from the ensemble's leader (the
// case the deadline rule of evidence.go exists for), the negotiated
// timeout, slow replies, an expired session, a frozen clock, Close while
// leading, restarts and switchovers. Each states the fault and asserts the
// promise exactly: no two valid terms at once, tokens that only grow.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electd/electd/clock"
	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/elector/zk"
	"github.com/electd/electd/internal/faultproxy"
	"github.com/electd/electd/internal/testenv"
)

// zkPorts reads a member's quorum and election ports, and every member's,
// from the zoo.cfg testenv wrote beside its log.
func zkPorts(t *testing.T, m zkMember) (quorum, election map[int]int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(filepath.Dir(m.LogPath()), "zoo.cfg"))
	if err != nil {
		t.Fatalf("read zoo.cfg: %v", err)
	}
	quorum, election = map[int]int{}, map[int]int{}
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok || !strings.HasPrefix(k, "server.") {
			continue
		}
		id, _ := strconv.Atoi(strings.TrimPrefix(k, "server."))
		parts := strings.Split(v, ":")
		quorum[id], _ = strconv.Atoi(parts[1])
		election[id], _ = strconv.Atoi(parts[2])
	}
	return quorum, election
}

// memberID is a member's id (its myid).
func memberID(t *testing.T, m zkMember) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(filepath.Dir(m.LogPath()), "data", "myid"))
	if err != nil {
		t.Fatalf("read myid: %v", err)
	}
	id, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return id
}

// tcpSocketsOf lists the (local port, remote port) of every TCP socket
// process pid holds.
func tcpSocketsOf(t *testing.T, pid int) [][2]int {
	t.Helper()
	inodes := map[string]bool{}
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	var out [][2]int
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		fh, err := os.Open(file)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) < 10 || !inodes[fs[9]] {
				continue
			}
			port := func(a string) int {
				_, h, _ := strings.Cut(a, ":")
				p, _ := strconv.ParseUint(h, 16, 16)
				return int(p)
			}
			out = append(out, [2]int{port(fs[1]), port(fs[2])})
		}
		_ = fh.Close()
	}
	return out
}

func nft(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command("nft", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("nft %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// isolateFollower cuts member f off from its peers, and only from them: its
// client port stays reachable. Every TCP packet of f's quorum and election
// sockets (found by f's pid in /proc) is dropped, both ways, and so is every
// new connection to a peer's quorum or election port (f dials the leader
// and its peers again once its own connection times out: the other members
// keep the connections they have). It returns the heal.
func isolateFollower(t *testing.T, f zkMember, others []zkMember) func() {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("cutting a member off its peers needs nft as root")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("no nft")
	}
	q, e := zkPorts(t, f)
	fid := memberID(t, f)
	own := map[int]bool{q[fid]: true, e[fid]: true}
	peer := map[int]bool{}
	for _, o := range others {
		id := memberID(t, o)
		peer[q[id]], peer[e[id]] = true, true
	}
	drop := map[int]bool{q[fid]: true, e[fid]: true}
	for _, s := range tcpSocketsOf(t, f.Pid()) {
		if own[s[0]] || peer[s[1]] {
			drop[s[0]] = true // f's end of a peer connection
		}
	}
	var ports, peers []string
	for p := range drop {
		if p != 0 {
			ports = append(ports, strconv.Itoa(p))
		}
	}
	for p := range peer {
		peers = append(peers, strconv.Itoa(p))
	}
	slices.Sort(ports)
	dropStaleTables(t)
	table := fmt.Sprintf("advzk%d", os.Getpid())
	rules := fmt.Sprintf(`table inet %[1]s {
	chain out {
		type filter hook output priority -10; policy accept;
		tcp sport { %[2]s } drop
		tcp dport { %[2]s } drop
		tcp dport { %[3]s } tcp flags & (syn|ack) == syn drop
	}
}
`, table, strings.Join(ports, ", "), strings.Join(peers, ", "))
	path := filepath.Join(t.TempDir(), "cut.nft")
	if err := os.WriteFile(path, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	nft(t, "-f", path)
	t.Logf("cut member %d (%s) off its peers:\n%s", fid, f.Addr(), rules)
	var once sync.Once
	heal := func() {
		once.Do(func() {
			if out, err := exec.Command("nft", "delete", "table", "inet", table).CombinedOutput(); err != nil {
				t.Errorf("heal: nft delete table %s: %v: %s", table, err, out)
			}
		})
	}
	t.Cleanup(heal)
	return heal
}

// dropStaleTables deletes the cut tables of test processes that are gone
// (a test binary killed before its cleanup leaves its table behind, and
// its rules drop the traffic of whatever server later takes those ports).
func dropStaleTables(t *testing.T) {
	t.Helper()
	out, err := exec.Command("nft", "list", "tables", "inet").Output()
	if err != nil {
		t.Fatalf("nft list tables: %v", err)
	}
	for _, f := range strings.Fields(string(out)) {
		pid, err := strconv.Atoi(strings.TrimPrefix(f, "advzk"))
		if !strings.HasPrefix(f, "advzk") || err != nil || syscall.Kill(pid, 0) == nil {
			continue
		}
		if out, err := exec.Command("nft", "delete", "table", "inet", f).CombinedOutput(); err != nil {
			t.Fatalf("delete the stale table %s: %v: %s", f, err, out)
		}
		t.Logf("deleted the stale table %s (its process is gone)", f)
	}
}

// TestTermFollowerPartitioned (PRIORITY ONE). A leads connected ONLY
// to follower F; B queues connected only to the other two members. F is cut
// off from its peers (its client link stays up). F keeps answering A's reads
// (the renewals) and pings until it notices, syncLimit·tickTime later, while
// the ensemble's leader hears no more touches of A's session and expires it
// on its own clock. The property: B's term must not begin before A's
// ValidUntil (and A's Done), both on this host's clock.
func TestTermFollowerPartitioned(t *testing.T) {
	followerPartitioned(t, false, 100*time.Millisecond)
}

// TestTermFollowerPartitionedZone is the same with a's URL naming all
// three members, as a real deployment would: a's links to the other two go
// through fault proxies that are closed from the start (a and F on one side
// of a zone partition, the ensemble's majority on the other), so a's
// client can only ever reach F.
func TestTermFollowerPartitionedZone(t *testing.T) {
	followerPartitioned(t, true, 100*time.Millisecond)
}

// TestTermFollowerPartitionedDefaults is the zone partition with
// electd's default renewal interval (ttl/5 = 800ms): the last renewal F
// answers falls anywhere in F's last second, so the overlap varies from
// run to run (up to about a second).
func TestTermFollowerPartitionedDefaults(t *testing.T) { followerPartitioned(t, true, 0) }

func followerPartitioned(t *testing.T, zone bool, renew time.Duration) {
	followerPartitionedOn(t, testenvEnsemble(t), "testenv zoo.cfg: tickTime=200 initLimit=10 syncLimit=5 (F gives up on its leader after 5·200ms = 1s)", zone, renew)
}

func followerPartitionedOn(t *testing.T, members []zkMember, cfg string, zone bool, renew time.Duration) {
	lead, f, g := roles(t, members)
	var all []string
	for _, m := range members {
		all = append(all, m.Addr())
	}
	t.Logf("ensemble: leader %s, F (A's only server) %s mode %q, G %s; %s",
		lead.Addr(), f.Addr(), f.Mode(), g.Addr(), cfg)
	// Short renewals so that the last renewal F answers is close to the moment F gives up.
	timing := elector.Timing{TTL: 4 * time.Second, RenewInterval: renew}
	aURL := "zk://" + f.Addr()
	if zone {
		aURL = zoneURL(t, lead, f, g)
	}
	t.Logf("a dials %s", aURL)
	a := electortest.DialURL(t, zk.Backend, aURL, elector.Candidate{Election: "part", ID: "a", Timing: timing})
	b := electortest.DialURL(t, zk.Backend, "zk://"+lead.Addr()+","+g.Addr(), elector.Candidate{Election: "part", ID: "b", Timing: timing})
	ctx := context.Background()
	ra := electortest.MustLead(t, electortest.Campaign(ctx, a), 20*time.Second, "a")
	t.Logf("a leads: token %#x, timing %s", ra.Term.Token, ra.Term.Timing())
	cb := electortest.Campaign(ctx, b)
	waitInLine(t, client(t, all), "part", 2, "b queued")

	// A watcher of a's node on the majority side: the deletion is the
	// ensemble's leader expiring a's session.
	deleted := watchFirst(t, client(t, []string{lead.Addr()}), "/electd/elections/part")
	held := sample(ra.Term, 20*time.Millisecond)
	time.Sleep(time.Second) // steady renewals

	heal := isolateFollower(t, f, []zkMember{lead, g})
	cut := time.Now()
	// F's mode, as F tells it, over time.
	modes := make(chan string, 1)
	go func() {
		var sb strings.Builder
		last := "follower"
		for time.Since(cut) < 8*time.Second {
			if m := f.Mode(); m != last {
				fmt.Fprintf(&sb, " %s→%q", time.Since(cut).Round(10*time.Millisecond), m)
				last = m
			}
			time.Sleep(50 * time.Millisecond)
		}
		modes <- sb.String()
	}()
	rb := electortest.MustLead(t, cb, 30*time.Second, "b")
	dA := held.endedWithin(t, 10*time.Second)
	gone := seenWithin(deleted, 5*time.Second)
	vA := held.maxValid()
	ms := relTo(cut)
	t.Logf("cut at 0: a's last ValidUntil while it held %s, a Done %s (err %v), a's node deleted (seen on the leader) %s, b granted %s (token %#x > %#x: %t); F's modes:%s",
		ms(vA), ms(dA), ra.Term.Err(), ms(gone), ms(rb.At), rb.Term.Token, ra.Term.Token, rb.Term.Token > ra.Term.Token, <-modes)
	heal()
	twoTerms(t, ra, rb, vA, dA, ms)
	electortest.Resign(t, rb.Term)
}

// sampled follows a leader's term while it holds: the greatest ValidUntil
// it showed (End clamps it to the end time), when that moved (changed,
// dropped when full) and when the term ended (ended). Its goroutines end
// with the term.
type sampled struct {
	mu      sync.Mutex
	max     time.Time
	changed chan time.Time
	ended   chan time.Time
}

// sample starts following term, reading its ValidUntil every every.
func sample(term *elector.Term, every time.Duration) *sampled {
	s := &sampled{changed: make(chan time.Time, 100), ended: make(chan time.Time, 1)}
	go func() {
		last := term.ValidUntil()
		for term.Err() == nil {
			v := term.ValidUntil()
			s.mu.Lock()
			if term.Err() == nil && v.After(s.max) {
				s.max = v
			}
			s.mu.Unlock()
			if !v.Equal(last) {
				last = v
				select {
				case s.changed <- time.Now():
				default:
				}
			}
			time.Sleep(every)
		}
	}()
	go func() { <-term.Done(); s.ended <- time.Now() }()
	return s
}

// maxValid is the greatest ValidUntil the term showed while it held.
func (s *sampled) maxValid() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max
}

// landed is when the term's next renewal is seen as it lands: changes
// seen before are passed over. It fails the test when none comes in 5s.
func (s *sampled) landed(t *testing.T) time.Time {
	t.Helper()
drain:
	for {
		select {
		case <-s.changed:
		default:
			break drain
		}
	}
	select {
	case c := <-s.changed:
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("a does not renew")
	}
	return time.Time{}
}

// endedWithin is when the term ended, failing the test when it has not
// within wait.
func (s *sampled) endedWithin(t *testing.T, wait time.Duration) time.Time {
	t.Helper()
	select {
	case dA := <-s.ended:
		return dA
	case <-time.After(wait):
		t.Fatal("a's term never ended")
	}
	return time.Time{}
}

// renewals waits for n changes of the term's ValidUntil (renewals seen),
// each within wait; where says where they run, for the failure.
func (s *sampled) renewals(t *testing.T, n int, wait time.Duration, where string) {
	t.Helper()
	for i := range n {
		select {
		case <-s.changed:
		case <-time.After(wait):
			t.Fatalf("a's renewal %d%s never came", i+1, where)
		}
	}
}

// twoTerms checks that b's term (rb) began after a's (ra) ended, by its
// greatest ValidUntil vA and its Done dA, with a greater token; ms
// renders the times.
func twoTerms(t *testing.T, ra, rb electortest.Result, vA, dA time.Time, ms func(time.Time) string) {
	t.Helper()
	if rb.Term.Token <= ra.Term.Token {
		t.Errorf("HOLE: token %#x after %#x", rb.Term.Token, ra.Term.Token)
	}
	end := vA
	if dA.After(end) {
		end = dA
	}
	if rb.At.Before(end) {
		t.Errorf("HOLE: two valid terms: b's term began at %s while a's term was valid until %s (Done at %s): overlap %s",
			ms(rb.At), ms(vA), ms(dA), end.Sub(rb.At).Round(time.Millisecond))
	}
}

// before checks that b's term (rb), granted after a fault at cut, began
// after a's term (ra, followed by s) ended and after a's greatest
// ValidUntil (vA), with a greater token. ok is false when a's term was
// still open wait after b's grant.
func (s *sampled) before(t *testing.T, ra, rb electortest.Result, cut time.Time, wait time.Duration) (vA, dA time.Time, ok bool) {
	t.Helper()
	select {
	case dA = <-s.ended:
	case <-time.After(wait):
		t.Errorf("HOLE: b granted %s after the fault while a's term is still open", rb.At.Sub(cut))
		return vA, dA, false
	}
	vA = s.maxValid()
	ms := relTo(cut)
	t.Logf("fault at 0: a's ValidUntil %s, a Done %s (%v), b granted %s; a's timing %s; tokens %#x then %#x",
		ms(vA), ms(dA), ra.Term.Err(), ms(rb.At), ra.Term.Timing(), ra.Term.Token, rb.Term.Token)
	if rb.At.Before(vA) || rb.At.Before(dA) {
		t.Errorf("HOLE: b's term began at %s, a's valid until %s, Done %s", ms(rb.At), ms(vA), ms(dA))
	}
	if rb.Term.Token <= ra.Term.Token {
		t.Errorf("HOLE: token %#x after %#x", rb.Term.Token, ra.Term.Token)
	}
	return vA, dA, true
}

// cutLeader is the shared race: a leads through a fault proxy, b waits
// on the server directly; fault() breaks a's link; b's grant must come
// after a's ValidUntil (sampled while it held) and a's Done.
func cutLeader(t *testing.T, addr, election string, timing elector.Timing, before func(p *faultproxy.Proxy), fault func(p *faultproxy.Proxy)) (ra, rb electortest.Result) {
	t.Helper()
	p := faultproxy.Start(t, addr)
	a := electortest.DialURL(t, zk.Backend, "zk://"+p.Addr(), elector.Candidate{Election: election, ID: "a", Timing: timing})
	b := electortest.DialURL(t, zk.Backend, "zk://"+addr, elector.Candidate{Election: election, ID: "b", Timing: timing})
	ctx := context.Background()
	ra = electortest.MustLead(t, electortest.Campaign(ctx, a), 10*time.Second, "a")
	cb := electortest.Campaign(ctx, b)
	time.Sleep(500 * time.Millisecond)
	electortest.StillWaiting(t, cb, "b")
	if before != nil {
		before(p)
	}
	held := sample(ra.Term, 5*time.Millisecond)
	cut := time.Now()
	fault(p)
	rb = electortest.MustLead(t, cb, 60*time.Second, "b")
	if _, _, ok := held.before(t, ra, rb, cut, time.Second); !ok {
		return ra, rb
	}
	p.Heal()
	return ra, rb
}

// TestTermNegotiatedTimeout: --ttl asks for a session timeout the
// server clamps (tickTime 200ms: 400ms..4s). The term's timing must be the
// negotiated one (the server's handshake answer), the renewal interval
// scaled, and b must not be granted before a's term ends when a's link is
// cut: asked 10s (clamped to 4s: a deadline on --ttl would run 6s past the
// expiry), 1s (granted as asked) and 300ms (raised to 400ms).
func TestTermNegotiatedTimeout(t *testing.T) {
	srv := testenv.StartZK(t)
	for _, c := range []struct {
		ask, renew, want time.Duration
	}{
		{10 * time.Second, 0, 4 * time.Second},
		{time.Second, 0, time.Second},
		{300 * time.Millisecond, 50 * time.Millisecond, 400 * time.Millisecond},
	} {
		t.Run(c.ask.String(), func(t *testing.T) {
			timing := elector.Timing{TTL: c.ask, RenewInterval: c.renew}
			ra, _ := cutLeader(t, srv.Addr(), "neg"+strings.ReplaceAll(c.ask.String(), ".", "_"), timing, nil, func(p *faultproxy.Proxy) { p.Cut() })
			got := ra.Term.Timing()
			wantRenew := c.renew
			if wantRenew == 0 {
				wantRenew = c.ask / 5
			}
			wantRenew = time.Duration(float64(wantRenew) * float64(c.want) / float64(c.ask))
			if got.TTL != c.want || got.RenewInterval != wantRenew {
				t.Errorf("asked ttl %s: term timing %s, want ttl %s renew %s", c.ask, got, c.want, wantRenew)
			}
		})
	}
}

// TestTermSlowReplies: a's link is slowed (each way) so that every
// renewal's answer comes late, then cut. A deadline counted from the
// reply's arrival instead of the request's send would outlast the session.
func TestTermSlowReplies(t *testing.T) {
	srv := testenv.StartZK(t)
	// Round trip ≈ 600ms, under the renewal interval (a renewal's request
	// is abandoned after one interval), so renewals succeed, each answered
	// ≈ 600ms after its send.
	timing := elector.Timing{TTL: 4 * time.Second, RenewInterval: 1500 * time.Millisecond}
	cutLeader(t, srv.Addr(), "slow", timing,
		func(p *faultproxy.Proxy) { p.SetDelay(300 * time.Millisecond); time.Sleep(4 * time.Second) },
		func(p *faultproxy.Proxy) { p.Cut() })
}

// TestTermExpiredThenBack: a's link is cut until the server expires
// its session, then healed: the client reconnects, learns of the expiry
// and opens a new session. a's term must have ended before b's grant, and
// a must not lead again with its old node: a new campaign of a queues
// behind b.
func TestTermExpiredThenBack(t *testing.T) {
	srv := testenv.StartZK(t)
	timing := elector.Timing{TTL: time.Second}
	var pp *faultproxy.Proxy
	ra, rb := cutLeader(t, srv.Addr(), "expired", timing, func(p *faultproxy.Proxy) { pp = p }, func(p *faultproxy.Proxy) { p.Cut() })
	_ = ra
	pp.Heal()
	// a's elector again (the same one): its client reconnects on a new session.
	h := &harness{single: srv}
	electortest.Eventually(t, 10*time.Second, "b alone in line", func() bool { return h.Queued(t, "expired") == 1 })
	time.Sleep(time.Second)
	if n := h.Queued(t, "expired"); n != 1 {
		t.Errorf("HOLE: %d nodes in line after a's session expired and its client came back (a stale node)", n)
	}
	electortest.Resign(t, rb.Term)
}

// TestTermSlowRoundTripLosesTerm: a healthy session whose round trip
// exceeds the renewal interval. Not a safety hole: every renewal is
// abandoned after one interval, so the term ends at its first deadline
// although the server answers every renewal (the liveness cost of the
// renewal's timeout).
func TestTermSlowRoundTripLosesTerm(t *testing.T) {
	srv := testenv.StartZK(t)
	p := faultproxy.Start(t, srv.Addr())
	timing := elector.Timing{TTL: 2 * time.Second, RenewInterval: 300 * time.Millisecond}
	a := electortest.DialURL(t, zk.Backend, "zk://"+p.Addr(), elector.Candidate{Election: "rtt", ID: "a", Timing: timing})
	ra := electortest.MustLead(t, electortest.Campaign(context.Background(), a), 10*time.Second, "a")
	p.SetDelay(200 * time.Millisecond) // round trip 400ms > renew 300ms, far under the session timeout
	slowed := time.Now()
	select {
	case <-ra.Term.Done():
		t.Logf("a's term ended %s after the round trip went to 400ms (renewal interval 300ms, ttl 2s): %v",
			time.Since(slowed).Round(time.Millisecond), ra.Term.Err())
	case <-time.After(6 * time.Second):
		t.Logf("a's term survived a 400ms round trip")
	}
}

// TestTermFakeClock: every deadline on the injected clock. The term
// starts once a Sync has gone through at least lag (on the elector's
// clock) after the answer to the request it vouches for, so the fake clock
// runs (a millisecond per millisecond) until a leads, then stands still.
// a's ValidUntil must be the send time of a request on the fake clock plus the
// window, and Since a fake time; with the fake clock frozen, a's term must
// outlive its TTL in real time (no deadline on the real clock), and
// advancing the fake clock past the window (with no renewal able to land
// after it) must end it.
func TestTermFakeClock(t *testing.T) {
	srv := testenv.StartZK(t)
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	fc := clock.NewFake(start)
	timing := elector.Timing{TTL: time.Second}
	a := electortest.DialURL(t, zk.Backend, "zk://"+srv.Addr(), elector.Candidate{Election: "fake", ID: "a", Timing: timing, Clock: fc})
	ca := electortest.Campaign(context.Background(), a)
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				fc.Advance(time.Millisecond)
			}
		}
	}()
	ra := electortest.MustLead(t, ca, 10*time.Second, "a")
	close(stop)
	<-stopped
	frozen := fc.Now()
	w := ra.Term.Timing().Window()
	if sent := ra.Term.ValidUntil().Add(-w); sent.Before(start) || !sent.Before(frozen) {
		t.Errorf("ValidUntil %s: its send time %s is not a time of the fake clock before the grant (from %s to %s)", ra.Term.ValidUntil(), sent, start, frozen)
	}
	if since := ra.Term.Leader.Since; since.Before(start) || since.After(frozen) {
		t.Errorf("Since %s, want a time of the fake clock (from %s to %s)", since, start, frozen)
	}
	select {
	case <-ra.Term.Done():
		t.Fatalf("HOLE: the term ended on the real clock (%v) while the fake clock stood still", ra.Term.Err())
	case <-time.After(3 * time.Second):
	}
	fc.Advance(w + time.Millisecond)
	select {
	case <-ra.Term.Done():
		if !errors.Is(ra.Term.Err(), elector.ErrLeaseExpired) {
			t.Logf("ended with %v", ra.Term.Err())
		}
	case <-time.After(3 * time.Second):
		t.Fatalf("the term outlived its window on the fake clock (ValidUntil %s, now %s)", ra.Term.ValidUntil(), fc.Now())
	}
}

// TestTermNoOrphans: candidates that give up (TryCampaign busy, a
// cancelled wait, a cancel right as the campaign starts, Close while
// waiting) leave no node behind to block the line.
func TestTermNoOrphans(t *testing.T) {
	srv := testenv.StartZK(t)
	h := &harness{single: srv}
	timing := elector.Timing{TTL: time.Second}
	a := electortest.DialURL(t, zk.Backend, "zk://"+srv.Addr(), elector.Candidate{Election: "orph", ID: "a", Timing: timing})
	ra := electortest.MustLead(t, electortest.Campaign(context.Background(), a), 10*time.Second, "a")
	for i := range 20 {
		c := electortest.DialURL(t, zk.Backend, "zk://"+srv.Addr(), elector.Candidate{Election: "orph", ID: fmt.Sprintf("c%d", i), Timing: timing})
		switch i % 4 {
		case 0:
			if _, err := c.(elector.Locker).TryCampaign(context.Background()); !errors.Is(err, elector.ErrBusy) {
				t.Errorf("try: %v", err)
			}
		case 1:
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			_, err := c.Campaign(ctx)
			cancel()
			if err == nil {
				t.Error("led while a leads")
			}
		case 2:
			ctx, cancel := context.WithCancel(context.Background())
			ch := electortest.Campaign(ctx, c)
			time.Sleep(time.Duration(i) * time.Millisecond)
			cancel()
			if r := <-ch; r.Err == nil {
				t.Error("led while a leads")
			}
		case 3:
			ch := electortest.Campaign(context.Background(), c)
			time.Sleep(time.Duration(i*3) * time.Millisecond)
			_ = c.Close()
			<-ch
		}
	}
	electortest.Eventually(t, 5*time.Second, "only a's node left", func() bool { return h.Queued(t, "orph") == 1 })
	b := electortest.DialURL(t, zk.Backend, "zk://"+srv.Addr(), elector.Candidate{Election: "orph", ID: "b", Timing: timing})
	cb := electortest.Campaign(context.Background(), b)
	time.Sleep(300 * time.Millisecond)
	electortest.Resign(t, ra.Term)
	rb := electortest.MustLead(t, cb, 3*time.Second, "b (blocked by an orphan?)")
	if rb.Term.Token <= ra.Term.Token {
		t.Errorf("HOLE: token %#x after %#x", rb.Term.Token, ra.Term.Token)
	}
	electortest.Resign(t, rb.Term)
}

// TestTermCloseWhileLeading: Close of a leading elector closes its
// session (the server deletes its node at once, and the next candidate
// leads); the term's Done must close before that candidate's grant. The
// term is ended by its keeper goroutine once it sees the elector closed,
// which runs concurrently with the session's close; renewals run every
// 10ms so that Close often lands during one.
func TestTermCloseWhileLeading(t *testing.T) {
	srv := testenv.StartZK(t)
	timing := elector.Timing{TTL: time.Second, RenewInterval: 10 * time.Millisecond}
	worst := -time.Hour
	for i := range 15 {
		election := fmt.Sprintf("close%d", i)
		a := electortest.DialURL(t, zk.Backend, "zk://"+srv.Addr(), elector.Candidate{Election: election, ID: "a", Timing: timing})
		b := electortest.DialURL(t, zk.Backend, "zk://"+srv.Addr(), elector.Candidate{Election: election, ID: "b", Timing: timing})
		ra := electortest.MustLead(t, electortest.Campaign(context.Background(), a), 10*time.Second, "a")
		cb := electortest.Campaign(context.Background(), b)
		time.Sleep(200*time.Millisecond + time.Duration(i)*time.Millisecond)
		aDone := make(chan time.Time, 1)
		go func() { <-ra.Term.Done(); aDone <- time.Now() }()
		_ = a.Close()
		rb := electortest.MustLead(t, cb, 5*time.Second, "b")
		dA := <-aDone
		if d := dA.Sub(rb.At); d > worst {
			worst = d
		}
		if rb.At.Before(dA) {
			t.Errorf("HOLE (round %d): b granted %s before a's Done (a closed)", i, dA.Sub(rb.At))
		}
		electortest.Resign(t, rb.Term)
	}
	t.Logf("worst: a's Done %s after b's grant (negative: before)", worst)
}

// TestTermRestartTokens: a standalone server killed and started again
// on its data directory: the next leader's token must exceed every earlier
// one (the zxid counter continues from the log).
func TestTermRestartTokens(t *testing.T) {
	srv := testenv.StartZK(t)
	timing := elector.Timing{TTL: time.Second}
	var last uint64
	for round := range 3 {
		a := electortest.DialURL(t, zk.Backend, "zk://"+srv.Addr(), elector.Candidate{Election: "restart", ID: fmt.Sprintf("a%d", round), Timing: timing})
		ra := electortest.MustLead(t, electortest.Campaign(context.Background(), a), 20*time.Second, "a")
		t.Logf("round %d: token %#x", round, ra.Term.Token)
		if ra.Term.Token <= last {
			t.Errorf("HOLE: token %#x after %#x", ra.Term.Token, last)
		}
		last = ra.Term.Token
		srv.Kill(t)
		select {
		case <-ra.Term.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("a's term outlived its server by 5s")
		}
		srv.Start(t)
	}
}

// TestTermSwitchoverTokens: a hands its term to c over b's head; b is
// passed and queues again. Terms must not overlap (a's Done before c's
// grant) and tokens must grow through a → c → b, however late b notices
// the floor.
func TestTermSwitchoverTokens(t *testing.T) {
	srv := testenv.StartZK(t)
	timing := elector.Timing{TTL: time.Second}
	mk := func(id string) elector.Locker {
		return electortest.DialURL(t, zk.Backend, "zk://"+srv.Addr(), elector.Candidate{Election: "sw", ID: id, Timing: timing})
	}
	a, b, c := mk("a"), mk("b"), mk("c")
	ctx := context.Background()
	ra := electortest.MustLead(t, electortest.Campaign(ctx, a), 10*time.Second, "a")
	cb := electortest.Campaign(ctx, b)
	h := &harness{single: srv}
	electortest.Eventually(t, 5*time.Second, "b queued", func() bool { return h.Queued(t, "sw") == 2 })
	cc := electortest.Campaign(ctx, c)
	electortest.Eventually(t, 5*time.Second, "c queued", func() bool { return h.Queued(t, "sw") == 3 })
	if err := ra.Term.ResignTo(ctx, "c"); err != nil {
		t.Fatalf("resign to c: %v", err)
	}
	dA := time.Now() // Done is closed before ResignTo writes anything
	rc := electortest.MustLead(t, cc, 5*time.Second, "c")
	electortest.StillWaiting(t, cb, "b")
	if rc.At.Before(dA) || rc.Term.Token <= ra.Term.Token {
		t.Errorf("HOLE: c granted at %s (a's Done at %s), token %#x after %#x", rc.At, dA, rc.Term.Token, ra.Term.Token)
	}
	electortest.Resign(t, rc.Term)
	rb := electortest.MustLead(t, cb, 5*time.Second, "b")
	t.Logf("tokens: a %#x, c %#x, b %#x", ra.Term.Token, rc.Term.Token, rb.Term.Token)
	if rb.Term.Token <= rc.Term.Token {
		t.Errorf("HOLE: b's token %#x after c's %#x", rb.Term.Token, rc.Term.Token)
	}
	electortest.Resign(t, rb.Term)
}

// TestTermFollowerPartitionedSyncLimit15 is the zone partition on an
// ensemble whose syncLimit is 15 (F answers for 3s after the cut): the
// overlap grows with syncLimit·tickTime, up to the session timeout.
func TestTermFollowerPartitionedSyncLimit15(t *testing.T) {
	ms, desc := startEnsemble(t, 15)
	followerPartitionedOn(t, ms, desc, true, 100*time.Millisecond)
}

// TestTermCutFollowerReadsVsSync is the root cause and a way out,
// shown with a plain client connected only to follower F: once F is cut
// off its peers, F still answers reads (Exists) until it gives up on its
// leader, but a Sync (which F must pass to the leader) or a write does
// not complete. A renewal made of Sync+Exists, or of a write, proves the
// quorum heard from the session; a bare read does not.
func TestTermCutFollowerReadsVsSync(t *testing.T) {
	members := testenvEnsemble(t)
	lead, f, g := roles(t, members)
	c := client(t, []string{f.Addr()})
	if _, err := c.Create("/probe", nil, 0, gozk.WorldACL(gozk.PermAll)); err != nil {
		t.Fatal(err)
	}
	isolateFollower(t, f, []zkMember{lead, g})
	cut := time.Now()
	// Reads first: a read of a session waits behind that session's
	// pending Sync or write at F, so they must not be in flight yet.
	var reads []string
	served := 0
	for time.Since(cut) < 600*time.Millisecond {
		ok, _, err := c.Exists("/probe")
		if ok && err == nil {
			served++
		}
		reads = append(reads, fmt.Sprintf("%s:%t/%v", time.Since(cut).Round(time.Millisecond), ok, err))
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("reads (Exists) served by F after the cut: %v", reads)
	if served == 0 {
		t.Errorf("F served no read after the cut")
	}
	at := time.Now()
	_, err := c.Sync("/probe")
	t.Logf("sync sent %s after the cut, answered %s later: %v", at.Sub(cut).Round(time.Millisecond), time.Since(at).Round(time.Millisecond), err)
	if err == nil {
		t.Errorf("sync succeeded through a cut-off follower")
	}
}
