package torture

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"syscall"
	"time"

	"github.com/electd/electd/internal/faultproxy"
	"github.com/electd/electd/internal/testenv"
	"github.com/electd/electd/test/kit"
	"github.com/electd/electd/test/proc"
	"github.com/electd/electd/test/record"
)

// kind is a kind of fault.
type kind string

// The faults. Each is healed before the next one starts, at once or after
// a bounded, randomly drawn duration.
const (
	sigtermElectd kind = "sigterm-electd" // SIGTERM to the leader's electd
	kill9Electd   kind = "kill9-electd"   // kill -9 of the leader's electd
	kill9Child    kind = "kill9-child"    // kill -9 of the leader's child (one without workers)
	kill9Main     kind = "kill9-main"     // kill -9 of the main process of a leader's child whose workers run
	resign        kind = "resign"         // POST /resign to the leader
	cutFollower   kind = "cut-follower"   // black-hole one follower's store link
	cutLeader     kind = "cut-leader"     // black-hole the leader's store link
	slowLeader    kind = "slow-leader"    // delay the leader's store link past the renew interval
	resetLeader   kind = "reset-leader"   // RST every connection of the leader to the store
	pauseLeader   kind = "sigstop-leader" // SIGSTOP electd and child for longer than the TTL
	storeRestart  kind = "store-restart"  // kill -9 the store, start it again (etcd: same data; Redis: empty)
	restartNode   kind = "restart-node"   // start a candidate that died again

	// The topologies' own faults (topology_test.go), drawn only on theirs.
	masterKill kind = "master-kill"    // Sentinel: kill -9 the master; after the failover, start it again as a replica
	masterStop kind = "master-sigstop" // Sentinel: SIGSTOP the master until the sentinels fail over, then SIGCONT
	// Sentinel (issue 24): SENTINEL FAILOVER while full resyncs are slow,
	// so that the old master keeps a replica after another is promoted.
	plannedFailover kind = "planned-failover"
	slotFailover    kind = "slot-failover"        // Cluster: kill -9 the election's slot's master; after the failover, start it again
	slotManual      kind = "slot-manual-failover" // Cluster: CLUSTER FAILOVER on a replica of the slot's master
	reshard         kind = "reshard"              // Cluster: move the slot to another master, pausing mid-migration
	misconf         kind = "misconf"              // Sentinel, Cluster: the (slot's) master's snapshots fail: writes refused with MISCONF
	oom             kind = "oom"                  // Sentinel, Cluster: the (slot's) master's maxmemory 1: writes refused with OOM

	// The etcd cluster's own (etcd_cluster_test.go), drawn only on it.
	killRaftLeader        kind = "kill-raft-leader"        // kill -9 the raft leader member, start it again after 0–1.5 TTL
	killRaftFollower      kind = "kill-raft-follower"      // kill -9 a follower member, start it again after 0–1.5 TTL
	partitionRaftLeader   kind = "partition-raft-leader"   // cut the raft leader member off from both peers for 0.5–2.5 TTL
	partitionRaftFollower kind = "partition-raft-follower" // cut a follower member off from both peers for 0.5–2.5 TTL
	slowMember            kind = "slow-member"             // delay one member's peer links (the raft leader's, or a follower's)
	// The leader's renewals pinned to the raft leader member (kit.Link.Pin),
	// which is then cut off from both peers for 1.5–2.5 TTL (issue 22).
	pinnedPartitionRaftLeader kind = "pinned-partition-raft-leader"
	// The same, but the raft leader's peer links delayed by 150 ms, and the
	// cut made as soon as the member it was asked to hand raft leadership to
	// (MoveLeader) leads, before the old one hears of the new term.
	transferPartitionRaftLeader kind = "transfer-partition-raft-leader"

	// A Redlock quorum's own (redlock_test.go), drawn only on it.
	serverKill        kind = "server-kill"        // kill -9 one server, start it again (empty) after 0.5–2.5 TTL
	minorityRestart   kind = "minority-restart"   // kill -9 a minority of the servers and start them again at once, empty, mid-term
	rollingRestart    kind = "rolling-restart"    // restart every server empty, one after another, 0.2–1 TTL apart
	partitionMajority kind = "partition-majority" // cut the leader off from a majority of the servers; it still reaches the rest
	partitionMinority kind = "partition-minority" // cut the leader off from a minority of the servers
	slowServer        kind = "slow-server"        // delay every node's link to one server past the renew interval
	pauseServer       kind = "sigstop-server"     // SIGSTOP one server for 0.5–2.5 TTL, then SIGCONT
	lateRequest       kind = "late-request"       // hold back every node's requests to one server each, past their timeout, mid-handover; deliver them late
)

// allKinds are every kind, in the order of the figures' rows.
var allKinds = []kind{sigtermElectd, kill9Electd, kill9Child, kill9Main, resign, cutFollower, cutLeader,
	slowLeader, resetLeader, pauseLeader, storeRestart, restartNode,
	masterKill, masterStop, plannedFailover, slotFailover, slotManual, reshard, misconf, oom,
	killRaftLeader, killRaftFollower, partitionRaftLeader, partitionRaftFollower, slowMember,
	pinnedPartitionRaftLeader, transferPartitionRaftLeader,
	serverKill, minorityRestart, rollingRestart, partitionMajority, partitionMinority, slowServer, pauseServer, lateRequest,
	killZKLeader, killZKFollower, rollingZK, partitionZK}

// proxyKinds act on a node's fault proxy: not drawn for a store that
// cannot be proxied (its nodes reach it directly; a cut there is a
// kit.Link's kernel filter, which can neither delay nor reset). A Redlock
// quorum can: each node has a proxy per server, and these act on all of
// them.
var proxyKinds = []kind{slowLeader, resetLeader}

// kindsFor are the kinds drawn on s: on etcd and Redis the first twelve,
// in that order (so that a seed replays as before); on a store its nodes
// reach directly (no proxies: kit.Reach) those without the proxy kinds;
// and the topology's own (ownKinds).
func kindsFor(s *kit.Store) []kind {
	var out []kind
	for _, k := range allKinds[:slices.Index(allKinds, restartNode)+1] {
		if len(s.Reach().Addrs) > 0 || !slices.Contains(proxyKinds, k) {
			out = append(out, k)
		}
	}
	if own := ownOf(s); own != nil {
		out = append(out, own.kinds...)
	}
	return out
}

// own are a topology's own faults.
type own struct {
	// is reports whether a store is of the topology: its entry started
	// the servers as that kind (kit.As).
	is    func(*kit.Store) bool
	kinds []kind
	// about, if set, says for the figures how the nodes reach the store.
	about func(*cluster) string
}

// ownKinds are the topologies' own faults, each drawn only on its own
// kind of store: Sentinel's and Cluster's (topology_test.go), the etcd
// cluster's (etcd_cluster_test.go), a Redlock quorum's (redlock_test.go)
// and a ZooKeeper ensemble's (zk_test.go). A store with faults of its own
// is one entry here.
var ownKinds = []own{
	{is: startedAs[*testenv.Sentinel], kinds: []kind{masterKill, masterStop, plannedFailover, misconf, oom}},
	{is: startedAs[*testenv.Cluster], kinds: []kind{slotFailover, slotManual, reshard, misconf, oom}},
	{is: startedAs[*testenv.EtcdCluster], kinds: memberKinds},
	{is: startedAs[*testenv.Redlock],
		kinds: []kind{serverKill, minorityRestart, rollingRestart, partitionMajority, partitionMinority, slowServer, pauseServer, lateRequest},
		about: (*cluster).aboutQuorum},
	{is: startedAs[*testenv.ZKEnsemble], kinds: zkKinds, about: (*cluster).aboutZK}, // zk_test.go
}

// ownOf is the entry of ownKinds of s (nil: s has no faults of its own).
func ownOf(s *kit.Store) *own {
	for i := range ownKinds {
		if ownKinds[i].is(s) {
			return &ownKinds[i]
		}
	}
	return nil
}

// startedAs reports whether s's servers were started as a T.
func startedAs[T any](s *kit.Store) bool {
	_, ok := kit.As[T](s)
	return ok
}

// topology returns c's store's servers, started as a T; c's own faults of
// that kind of store ask for it (one drawn on another kind fails t).
func topology[T any](c *cluster) T {
	c.t.Helper()
	v, ok := kit.As[T](c.s)
	if !ok {
		c.t.Fatalf("torture: %s: its servers are not a %T", c.s.Name, v)
	}
	return v
}

// fault is one injected fault and what followed it.
type fault struct {
	seq    int
	kind   kind
	target string      // the node it hit ("" for the store)
	old    *record.Run // the leader's child when it began
	at     time.Time   // when it was applied
	lost   time.Time   // cut-leader, store-restart, partition-majority: every renewal a majority acknowledged to the leader was sent before this
	healed time.Time   // when it was healed (at, for instant faults)
	note   string      // its parameters
	pause  *pause      // sigstop-leader only
	// storeUp: the topology faults that move the election's slot or
	// master (master-kill, master-sigstop, planned-failover, slot-failover,
	// slot-manual-failover, reshard; misconf when the sentinels failed
	// over): when its new master took writes.
	storeUp time.Time
	// raftUp: kill-raft-leader, partition-raft-leader,
	// pinned-partition-raft-leader, transfer-partition-raft-leader: when
	// the other two members agreed on a new raft leader (zero: not while it
	// lasted).
	raftUp time.Time
	// stepDown: pinned-partition-raft-leader,
	// transfer-partition-raft-leader: the cut → the cut-off raft leader
	// names itself the leader no more (0: not while the cut lasted).
	// transferred: transfer-partition-raft-leader: MoveLeader asked → the
	// transferee names itself the leader (0: it did not).
	stepDown, transferred time.Duration
	// early: on the etcd cluster, how long before the deadline the old
	// term had earned the next term was elected (a negative term gap,
	// from the electd logs; termGap); 0 if not early or not measured.
	early time.Duration

	next      *record.Run   // the first child of a later term, if one started
	recovery  time.Duration // healed → a child running again (0: one ran throughout)
	childGone time.Duration // kill9-electd: the kill → its child gone from /proc
	treeGone  time.Duration // kill9-electd, kill9-main: the kill → the last worker gone from /proc (0: no workers)
	workers   []*worker     // kill9-electd, kill9-main: the old child's workers when it was killed
	whole     time.Duration // server-kill, minority-restart, rolling-restart: the heal → every server holds the term again (0: not measured)
	ahead     time.Duration // see stoppedLate
	window    time.Duration // the guaranteed window, when ahead was measured
	figs      []figure      // see measure
}

// scheduler draws faults: every kind once per round, in a random order,
// skipping kinds that do not apply in the cluster's state; a restart when
// too few candidates are up.
type scheduler struct {
	rng   *rand.Rand
	kinds []kind
	deck  []kind
	minUp int
}

func newScheduler(rng *rand.Rand, nodes int, kinds []kind) *scheduler {
	return &scheduler{rng: rng, kinds: kinds, minUp: max(2, nodes-2)}
}

// state is what decides which kinds apply: how many candidates are up
// and down, and what the leader's child is.
type state struct {
	up, down int
	// workers: the leader's child has workers running; treeDies: its
	// electd's containment kills the whole tree with a kill -9'd electd.
	workers, treeDies bool
}

func (s *scheduler) next(st state) kind {
	if st.up < s.minUp && st.down > 0 {
		return restartNode
	}
	for refill := 0; refill < 2; refill++ {
		for i, k := range s.deck {
			if applies(k, st) {
				s.deck = append(s.deck[:i:i], s.deck[i+1:]...)
				return k
			}
		}
		s.deck = s.deck[:0]
		for _, i := range s.rng.Perm(len(s.kinds)) {
			s.deck = append(s.deck, s.kinds[i])
		}
	}
	return resign
}

func applies(k kind, st state) bool {
	switch k {
	case restartNode:
		return st.down > 0
	case kill9Electd:
		// Under pgroup containment a kill -9'd electd leaves its child's
		// workers running (documented): not a fault the promise covers.
		return st.up >= 2 && (!st.workers || st.treeDies)
	case sigtermElectd, cutFollower, cutLeader, pauseLeader, partitionMajority:
		return st.up >= 2 // someone must be able to take over (or be cut)
	case kill9Child:
		return !st.workers
	case kill9Main:
		return st.workers
	}
	return true
}

// between draws a duration uniformly in [lo, hi]·unit.
func between(rng *rand.Rand, unit time.Duration, lo, hi float64) time.Duration {
	return time.Duration((lo + rng.Float64()*(hi-lo)) * float64(unit)).Round(time.Millisecond)
}

// inject applies f (its kind, on the settled leader lead whose child is
// old) and heals it.
func (c *cluster) inject(f *fault, rng *rand.Rand, lead *node) {
	t, ttl := c.t, c.cfg.ttl
	f.target = lead.id
	switch f.kind {
	case sigtermElectd:
		l := lead.cur
		f.at = time.Now()
		c.must(l.TrySignal(syscall.SIGTERM))
		if !l.Wait(exitTimeout) {
			c.fatalf(f, "electd %s did not exit within %s of SIGTERM", lead.id, exitTimeout)
		}
		lead.cur = nil
		if code := l.ExitCode(); code != 0 {
			c.fatalf(f, "electd %s exited with %d after SIGTERM, want 0", lead.id, code)
		}
		f.healed = f.at

	case kill9Electd:
		l := lead.cur
		f.workers = c.j.workersOf(f.old)
		f.at = time.Now()
		l.kill9()
		lead.cur = nil
		if !proc.WaitGone(f.old.Pid, goneBound) {
			c.fatalf(f, "child %s still alive %s after kill -9 of its electd", f.old, goneBound)
		}
		f.childGone = time.Since(f.at)
		f.treeGone = c.workersGone(f)
		if code := l.ExitCode(); code != 128+int(syscall.SIGKILL) {
			t.Errorf("electd %s exit code %d after kill -9, want 137", lead.id, code)
		}
		f.healed = f.at

	case kill9Child, kill9Main:
		f.workers = c.j.workersOf(f.old)
		if f.kind == kill9Main {
			f.note = fmt.Sprintf("%d workers", len(f.workers))
			if lead.ignoreTerm {
				f.note += " that ignore SIGTERM"
			}
		}
		f.at = time.Now()
		if err := syscall.Kill(f.old.Pid, syscall.SIGKILL); err != nil {
			f.note = fmt.Sprintf("child already gone: %v", err)
		}
		f.treeGone = c.workersGone(f)
		f.healed = f.at

	case resign:
		f.at = time.Now()
		c.resign(f, lead)
		f.healed = f.at

	case cutFollower, cutLeader:
		target, lo, hi := lead, 1.5, 2.5
		if f.kind == cutFollower {
			var followers []*node
			for _, n := range c.up() {
				if n != lead {
					followers = append(followers, n)
				}
			}
			target, lo, hi = followers[rng.IntN(len(followers))], 0.5, 1.5
			f.target = target.id
		}
		d, reset := between(rng, ttl, lo, hi), rng.IntN(2) == 0
		f.note = fmt.Sprintf("cut %s", d)
		if f.kind == cutLeader {
			c.awaitReply(target) // cut just after an acknowledgement: the tightest case
		}
		f.at = time.Now()
		target.cut()
		if f.kind == cutLeader {
			f.lost = time.Now()
		}
		time.Sleep(d) // the fault's length is the experiment
		target.heal()
		if reset && len(target.proxies) > 0 {
			target.each((*faultproxy.Proxy).Reset) // the connections died during the partition
			f.note += ", then reset"
		}
		f.healed = time.Now()

	case slowLeader:
		delay, d := between(rng, c.cfg.renew, 1.2, 2.5), between(rng, ttl, 1.5, 2.5)
		f.note = fmt.Sprintf("one-way delay %s (renew every %s) for %s", delay, c.cfg.renew, d)
		f.at = time.Now()
		lead.each(func(px *faultproxy.Proxy) { px.SetDelay(delay) })
		time.Sleep(d)
		lead.each(func(px *faultproxy.Proxy) { px.SetDelay(0) })
		f.healed = time.Now()

	case resetLeader:
		f.at = time.Now()
		lead.each((*faultproxy.Proxy).Reset)
		f.healed = f.at

	case pauseLeader:
		l, d := lead.cur, between(rng, ttl, 1.5, 2.5)
		ws := c.j.workersOf(f.old)
		// A host resuming runs child and electd again at the same moment,
		// or, when its CPUs are busy, schedules electd a little later.
		var lag time.Duration
		if rng.IntN(2) == 0 {
			lag = between(rng, time.Millisecond, 1, 50)
		}
		f.note = fmt.Sprintf("paused %s, resumed together", d)
		if lag > 0 {
			f.note = fmt.Sprintf("paused %s, electd resumed %s after its child", d, lag)
		}
		f.at = time.Now()
		c.must(l.TrySignal(syscall.SIGSTOP))
		c.must(ignoreGone(syscall.Kill(-f.old.Pid, syscall.SIGSTOP))) // the child's process group
		for _, w := range ws {                                        // and the workers that left it: the whole host pauses
			c.must(ignoreGone(c.signalWorker(w, syscall.SIGSTOP)))
		}
		time.Sleep(d)
		if err := c.j.sync(); err != nil {
			c.fatalf(f, "record log: %v", err)
		}
		resumed := time.Now()
		f.pause = c.j.paused(c.j.run(f.old.Pid), f.at, resumed)
		c.must(ignoreGone(syscall.Kill(-f.old.Pid, syscall.SIGCONT)))
		for _, w := range ws {
			c.must(ignoreGone(c.signalWorker(w, syscall.SIGCONT)))
		}
		if lag > 0 {
			time.Sleep(lag)
		}
		c.must(l.TrySignal(syscall.SIGCONT))
		f.healed = resumed

	case storeRestart:
		d := between(rng, ttl, 0, 1.5)
		f.target, f.note = "", fmt.Sprintf("down %s", d)
		if c.s.Kills != "" {
			f.note += ", " + c.s.Kills
		}
		// Through its proxies; without a proxy to watch (a direct store)
		// it returns at once, and f.lost is less tight.
		c.awaitReply(lead)
		f.at = time.Now()
		c.s.Kill(t)
		f.lost = time.Now() // killed and reaped: it acknowledges nothing more
		time.Sleep(d)
		c.s.Start(t)
		f.healed = time.Now()

	case restartNode:
		down := c.down()
		n := down[rng.IntN(len(down))]
		f.target = n.id
		f.at = time.Now()
		c.start(n)
		f.healed = time.Now()

	case serverKill, minorityRestart, rollingRestart, partitionMajority, partitionMinority, slowServer, pauseServer, lateRequest:
		c.injectQuorum(f, rng, lead)

	case killRaftLeader, killRaftFollower, partitionRaftLeader, partitionRaftFollower, slowMember,
		pinnedPartitionRaftLeader, transferPartitionRaftLeader:
		c.injectMember(f, rng, lead)

	case killZKLeader, killZKFollower, rollingZK, partitionZK:
		c.injectZK(f, rng, lead)

	default:
		c.injectTopology(f, rng)
	}
}

// resign asks lead to resign (POST /resign), for f.
func (c *cluster) resign(f *fault, lead *node) {
	code, body, err := lead.cur.Do(http.MethodPost, "/resign", "")
	switch {
	case err != nil:
		c.fatalf(f, "POST /resign to %s: %v", lead.id, err)
	case code == http.StatusConflict: // lost the lead a moment ago: not a fault of ours
		f.note = joinNote(f.note, "409: no longer the leader")
	case code != http.StatusOK:
		c.fatalf(f, "POST /resign to %s: %d %s", lead.id, code, body)
	}
}

// joinNote appends more to a fault's note.
func joinNote(note, more string) string {
	if note == "" {
		return more
	}
	return note + "; " + more
}

// workersGone waits until every worker of f's old child is gone from /proc
// and returns how long after the fault the last one was (0: none had
// workers). One still alive after goneBound is left to verify, which counts
// it as an orphan once the next term has begun.
func (c *cluster) workersGone(f *fault) time.Duration {
	var last time.Duration
	for _, w := range f.workers {
		at, ok := proc.GoneAt(w.Pid, goneBound-time.Since(f.at), time.Millisecond)
		if !ok && c.isWorker(w) {
			f.note += fmt.Sprintf("; %s alive %s after the kill", w.Role, goneBound)
			return 0
		}
		if !ok { // its pid names another process now: gone
			at = time.Now()
		}
		last = max(last, at.Sub(f.at))
	}
	return last
}

// awaitReply waits (at most two renew intervals) until the store sends
// n something, most likely the acknowledgement of a renewal: through its
// proxy, or (Redlock) through every one of its proxies.
func (c *cluster) awaitReply(n *node) {
	c.awaitReplyFrom(n.proxies)
}

// awaitReplyFrom waits (at most two renew intervals) until each of pxs has
// carried something from the store to its node.
func (c *cluster) awaitReplyFrom(pxs []*faultproxy.Proxy) {
	if len(pxs) == 0 {
		return // a kernel filter counts nothing: cut at once
	}
	before := make([]int64, len(pxs))
	for i, px := range pxs {
		before[i] = px.Stats().BytesDown
	}
	for end := time.Now().Add(2 * c.cfg.renew); time.Now().Before(end); {
		got := 0
		for i, px := range pxs {
			if px.Stats().BytesDown != before[i] {
				got++
			}
		}
		if got == len(pxs) {
			return
		}
		time.Sleep(time.Millisecond) // polling a counter with a deadline
	}
}

// ignoreGone maps "no such process" to nil: a child may have exited
// between the settle and the fault.
func ignoreGone(err error) error {
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// must fails the test on a signalling error.
func (c *cluster) must(err error) {
	c.t.Helper()
	if err != nil {
		c.t.Fatalf("torture: %v", err)
	}
}
