package torture

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/electd/electd/internal/testenv"
)

// etcdCluster is the store's etcd cluster (its own faults').
func (c *cluster) etcdCluster() *testenv.EtcdCluster { return topology[*testenv.EtcdCluster](c) }

// injectMember applies and heals one of the etcd cluster's own faults: a
// member, the raft leader or a follower, killed or cut off from its two
// peers, or slowed on its peer links; or the raft leader cut off while the
// electd leader n's renewals are pinned to it, after a leadership transfer
// or not (injectPinned). Each is healed once every member follows one
// leader again (testenv's WaitHealthy).
func (c *cluster) injectMember(f *fault, rng *rand.Rand, n *node) {
	t, ec := c.t, c.etcdCluster()
	f.target = ""
	size := len(ec.Members())
	lead := ec.Leader(t)
	target := lead
	switch f.kind {
	case killRaftFollower, partitionRaftFollower:
		target = (lead + 1 + rng.IntN(size-1)) % size
	case slowMember:
		target = rng.IntN(size)
	case pinnedPartitionRaftLeader, transferPartitionRaftLeader:
		c.injectPinned(f, rng, n, lead)
		return
	}
	m := ec.Members()[target]
	f.note = fmt.Sprintf("m%d", target)
	if target == lead {
		f.note += ", the raft leader"
	}
	switch f.kind {
	case killRaftLeader, killRaftFollower:
		d := between(rng, c.cfg.ttl, 0, 1.5)
		f.note += fmt.Sprintf(", down %s", d)
		f.at = time.Now()
		m.Kill(t)
		if target == lead {
			now := ec.Leader(t) // the running two agree on one of them
			f.raftUp = time.Now()
			f.note += fmt.Sprintf("; m%d led after %s", now, ms(f.raftUp.Sub(f.at)))
		}
		time.Sleep(time.Until(f.at.Add(d))) // the fault's length is the experiment
		m.Start(t)
		ec.WaitHealthy(t)
		f.healed = time.Now()

	case partitionRaftLeader, partitionRaftFollower:
		d := between(rng, c.cfg.ttl, 0.5, 2.5)
		f.note += fmt.Sprintf(", partitioned %s", d)
		f.at = time.Now()
		ec.Partition(target)
		if target == lead {
			if now, ok := c.awaitNewRaftLeader(lead, f.at.Add(d)); ok {
				f.raftUp = time.Now()
				f.note += fmt.Sprintf("; m%d led after %s", now, ms(f.raftUp.Sub(f.at)))
			} else {
				f.note += "; no other leader while it lasted"
			}
		}
		time.Sleep(time.Until(f.at.Add(d))) // the partition's length is the experiment
		ec.Heal(target)
		now := ec.Leader(t)
		f.healed = time.Now()
		f.note += fmt.Sprintf("; m%d leads after the heal", now)

	case slowMember:
		// Delays from below the election timeout (500 ms: the raft leader
		// keeps leading, every commit through it waits two crossings) to
		// above it (its peers hear nothing for that long at the onset).
		delay, d := between(rng, c.cfg.renew, 0.25, 2), between(rng, c.cfg.ttl, 1.5, 2.5)
		f.note += fmt.Sprintf(", peer links delayed %s each way for %s", delay, d)
		f.at = time.Now()
		ec.SetPeerDelay(target, delay)
		time.Sleep(d) // the fault's length is the experiment
		ec.SetPeerDelay(target, 0)
		now := ec.Leader(t)
		f.healed = time.Now()
		f.note += fmt.Sprintf("; m%d leads after it", now)
	}
}

// awaitNewRaftLeader waits, until the deadline, for every member other
// than old to name the same raft leader, one of them (by Status, which
// needs no quorum), and returns its index.
func (c *cluster) awaitNewRaftLeader(old int, deadline time.Time) (int, bool) {
	for time.Now().Before(deadline) {
		if i, ok := c.newRaftLeader(old, deadline); ok {
			return i, true
		}
		time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
	}
	return -1, false
}

func (c *cluster) newRaftLeader(old int, deadline time.Time) (int, bool) {
	ec := c.etcdCluster()
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	ids := map[uint64]int{}
	var leader uint64
	for i := range ec.Members() {
		if i == old {
			continue
		}
		st, err := ec.Status(ctx, i)
		if err != nil || st.Leader == 0 || (leader != 0 && st.Leader != leader) {
			return -1, false
		}
		ids[st.Header.MemberId], leader = i, st.Leader
	}
	i, ok := ids[leader]
	return i, ok
}

// transferDelay is the raft leader's peer delay during
// transfer-partition-raft-leader: three heartbeats (50 ms), well below the
// election timeout (500 ms), so that no follower campaigns on its own; but
// the new leader's first message to the old one (its vote request) takes
// that long to arrive, which is the harness's window to cut the old one off
// before it hears of the new term.
const transferDelay = 150 * time.Millisecond

// transferBound bounds the wait for the transferee to lead: raft aborts a
// transfer after one election timeout (500 ms); the rest is the delay and
// a busy machine.
const transferBound = 2 * time.Second

// pinBound bounds the wait until the pinned leader's requests all go to
// its member: its /healthz report is up to a second old, and each of its
// connections to the other members is reset at its next request, which a
// renewal or two brings.
const pinBound = 5 * time.Second

// memberKinds are the etcd cluster's own kinds, after which the figures
// compare the old term's deadline with the next term's start (termGap).
var memberKinds = []kind{killRaftLeader, killRaftFollower, partitionRaftLeader, partitionRaftFollower, slowMember,
	pinnedPartitionRaftLeader, transferPartitionRaftLeader}

// injectPinned applies and heals pinned-partition-raft-leader and
// transfer-partition-raft-leader (issue 22). First the electd leader n is
// pinned to the raft leader member lead (kit.Link.Pin: its connections to
// the other two members are reset and new ones refused, so that its etcd
// client, which balances over the members it is connected to, sends every
// request, renewals included, to lead), and the harness waits until n's
// /healthz says that lead alone is in use. Then:
//
//   - pinned-partition-raft-leader: lead is cut off from both peers, both
//     ways (clients still reach it);
//   - transfer-partition-raft-leader: lead's peer links are delayed by
//     transferDelay, lead is asked to hand raft leadership to one of the
//     others (MoveLeader, on a goroutine: it returns only once lead sees the
//     new leader), and lead is cut off as soon as that member's own Status
//     names itself the leader, before lead hears of the new term (checked
//     by Status: lead still leads the older term).
//
// Cut off, lead goes on acknowledging n's renewals until it steps down
// (CheckQuorum, up to two election timeouts after the cut; measured by its
// Status), while the new raft leader extended n's lease by one election
// timeout only: after a transfer it leads at once, so a renewal that lead
// acknowledged can earn n a deadline beyond the lease's end on the new
// leader. The cut lasts 1.5–2.5 TTL, which leaves the lease time to lapse
// there, as n reaches no other member; then lead is healed, its delay
// removed and n unpinned.
func (c *cluster) injectPinned(f *fault, rng *rand.Rand, n *node, lead int) {
	t, ec := c.t, c.etcdCluster()
	size := len(ec.Members())
	m := ec.Members()[lead]
	d := between(rng, c.cfg.ttl, 1.5, 2.5)
	to := -1
	if f.kind == transferPartitionRaftLeader {
		to = (lead + 1 + rng.IntN(size-1)) % size
	}
	f.target = n.id
	f.note = fmt.Sprintf("renewals pinned to m%d, the raft leader", lead)
	n.link.Pin(m.Endpoint())
	if took, ok, seen := c.awaitPinned(n, lead); ok {
		f.note += fmt.Sprintf(" (only member in use after %s)", ms(took))
	} else {
		// electd's renewals stay with one member, on a connection of their
		// own, and an idle connection to another member is reset only once
		// it sends: /healthz may list it in use for good. The renewals move
		// to the raft leader at their first refusal (a renewal interval at
		// most), well within pinBound.
		f.note += fmt.Sprintf(" (other members still listed in use after %s: %s; the renewals move at their first refusal)", pinBound, seen)
	}
	ctx, cancel := context.WithTimeout(context.Background(), topologyWait)
	defer cancel()
	leadID := uint64(0)
	if st, err := ec.Status(ctx, lead); err == nil {
		leadID = st.Header.MemberId
	}

	var cut time.Time
	var moved chan struct{} // closed when MoveLeader returned moveErr
	var moveErr error
	mctx, stopMove := context.WithTimeout(context.Background(), topologyWait) // MoveLeader's
	defer stopMove()
	switch f.kind {
	case pinnedPartitionRaftLeader:
		f.note += fmt.Sprintf(", partitioned %s", d)
		f.at = time.Now()
		ec.Partition(lead)
		cut = f.at

	case transferPartitionRaftLeader:
		f.note += fmt.Sprintf(", peer links delayed %s, raft leadership moved to m%d", transferDelay, to)
		st, err := ec.Status(ctx, to)
		if err != nil {
			f.note += fmt.Sprintf("; not applied: %v", err)
			f.at = time.Now()
			break
		}
		toID := st.Header.MemberId
		ec.SetPeerDelay(lead, transferDelay)
		moved = make(chan struct{})
		f.at = time.Now()
		go func() { moveErr = moveLeader(mctx, m.Endpoint(), toID); close(moved) }()
		led, err := c.awaitLeads(to, toID, moved, &moveErr, f.at.Add(transferBound))
		if err != nil {
			f.note += fmt.Sprintf("; not applied: %v", err)
			break
		}
		ec.Partition(lead)
		cut = time.Now()
		f.transferred = led.Sub(f.at)
		f.note += fmt.Sprintf("; m%d led %s after MoveLeader, m%d cut %s later for %s", to, ms(f.transferred), lead, ms(cut.Sub(led)), d)
		f.note += "; " + c.termsAtCut(ctx, lead, leadID, to)
	}

	if !cut.IsZero() {
		c.awaitAfterCut(f, lead, leadID, cut, cut.Add(d))
		time.Sleep(time.Until(cut.Add(d))) // the partition's length is the experiment
		ec.Heal(lead)
	}
	ec.SetPeerDelay(lead, 0)
	n.link.Unpin()
	if moved != nil {
		stopMove()
		select {
		case <-moved:
			if moveErr != nil {
				f.note += fmt.Sprintf("; MoveLeader: %v", moveErr)
			} else {
				f.note += "; MoveLeader succeeded"
			}
		case <-time.After(topologyWait):
			f.note += "; MoveLeader did not return"
		}
	}
	now := ec.Leader(t)
	f.healed = time.Now()
	f.note += fmt.Sprintf("; m%d leads after the heal", now)
}

// awaitPinned waits (pinBound) until n's /healthz reports member alone in
// use by its store connection, and returns how long that took, or what it
// last saw.
func (c *cluster) awaitPinned(n *node, member int) (time.Duration, bool, string) {
	begin := time.Now()
	want := c.etcdCluster().Members()[member].Endpoint()
	seen := "no report"
	for time.Since(begin) < pinBound {
		_, body, err := n.cur.Get("/healthz")
		var h struct {
			Members []struct {
				Endpoint string `json:"endpoint"`
				InUse    bool   `json:"in_use"`
			} `json:"store_members"`
		}
		switch {
		case err != nil:
			seen = err.Error()
		case json.Unmarshal(body, &h) != nil:
			seen = fmt.Sprintf("/healthz %q", body)
		default:
			var inUse []string
			for _, mb := range h.Members {
				if mb.InUse {
					inUse = append(inUse, mb.Endpoint)
				}
			}
			seen = fmt.Sprintf("in use %v, want %s", inUse, want)
			if len(inUse) == 1 && inUse[0] == want {
				return time.Since(begin), true, seen
			}
		}
		time.Sleep(settlePoll) // polling a condition with a deadline
	}
	return 0, false, seen
}

// moveLeader asks the member at endpoint (the raft leader) to hand raft
// leadership to the member with id to, on a client of that member alone.
// It returns once the member sees the new leader, or ctx ends.
func moveLeader(ctx context.Context, endpoint string, to uint64) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	_, err = cli.MoveLeader(ctx, to)
	return err
}

// awaitLeads waits until member i (whose id is id) names itself the raft
// leader in its own Status, which it answers alone, and returns when it
// did; or an error if the MoveLeader call (closing moved, its error in
// *moveErr) fails first, or the deadline passes.
func (c *cluster) awaitLeads(i int, id uint64, moved <-chan struct{}, moveErr *error, deadline time.Time) (time.Time, error) {
	ec := c.etcdCluster()
	for time.Now().Before(deadline) {
		select {
		case <-moved:
			if *moveErr != nil {
				return time.Time{}, fmt.Errorf("MoveLeader failed before m%d led: %w", i, *moveErr)
			}
			// Returned without error: the old leader already follows the
			// new one, and the cut comes late (termsAtCut says so).
		default:
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		st, err := ec.Status(ctx, i)
		cancel()
		if err == nil && st.Leader == id {
			return time.Now(), nil
		}
		time.Sleep(2 * time.Millisecond) // polling a condition with a deadline; the window is transferDelay
	}
	return time.Time{}, fmt.Errorf("m%d did not lead within %s", i, transferBound)
}

// termsAtCut says, from both members' Status, whether the old raft leader
// (index old, id oldID) was cut off before it heard of the new leader's
// term: it still names itself the leader, in an older term.
func (c *cluster) termsAtCut(ctx context.Context, old int, oldID uint64, now int) string {
	ec := c.etcdCluster()
	o, err := ec.Status(ctx, old)
	if err != nil {
		return err.Error()
	}
	nw, err := ec.Status(ctx, now)
	if err != nil {
		return err.Error()
	}
	if o.Leader == oldID && o.RaftTerm < nw.RaftTerm {
		return fmt.Sprintf("m%d cut still leading term %d, m%d leads term %d", old, o.RaftTerm, now, nw.RaftTerm)
	}
	return fmt.Sprintf("m%d had heard of term %d before the cut (it follows %x in term %d): the cut came late",
		old, nw.RaftTerm, o.Leader, o.RaftTerm)
}

// awaitAfterCut waits, until the deadline (the heal), for the cut-off raft
// leader old (id oldID) to stop naming itself the leader (f.stepDown,
// from the cut), and for the other two to follow one new leader
// (f.raftUp), and notes both.
func (c *cluster) awaitAfterCut(f *fault, old int, oldID uint64, cut, deadline time.Time) {
	ec := c.etcdCluster()
	var down time.Time
	now := -1
	for time.Now().Before(deadline) && (down.IsZero() || f.raftUp.IsZero()) {
		if down.IsZero() {
			ctx, cancel := context.WithDeadline(context.Background(), deadline)
			st, err := ec.Status(ctx, old)
			cancel()
			if err == nil && st.Leader != oldID {
				down = time.Now()
				f.stepDown = down.Sub(cut)
			}
		}
		if f.raftUp.IsZero() {
			if i, ok := c.newRaftLeader(old, deadline); ok {
				f.raftUp, now = time.Now(), i
			}
		}
		time.Sleep(10 * time.Millisecond) // polling conditions with a deadline
	}
	if down.IsZero() {
		f.note += fmt.Sprintf("; m%d still named itself the leader at the heal", old)
	} else {
		f.note += fmt.Sprintf("; m%d stepped down %s after the cut", old, ms(f.stepDown))
	}
	if f.raftUp.IsZero() {
		f.note += "; no other leader while it lasted"
	} else {
		f.note += fmt.Sprintf("; m%d led (for the others) %s after the fault", now, ms(f.raftUp.Sub(f.at)))
	}
}

// termGap is how long after the old term's last deadline (the latest
// valid_until its electd logged for the term's lease: at the election, or
// with an acknowledged renewal) the next term's electd logged "elected",
// from the electd logs (debug level). Negative: the store let the next term
// begin before the deadline the old one had earned, the hole of issue 22,
// whether or not the children overlapped (the supervisor stops a child
// stop-timeout plus the stop margin before the deadline, and gives the term
// up then, so only a larger overlap reaches the record). Not measured when
// the old electd's own revocation of its lease ("lease revoked", logged
// when etcd answered) came before both that deadline and the next term's
// election: it gave the term up, and the revocation let the next one in.
// (etcd answers a revocation of a lease that is already gone as one that
// succeeded, so a lapse the old electd's revocation found before the next
// term was elected is not measured either.)
func (c *cluster) termGap(f *fault) (time.Duration, bool) {
	old := c.logEvents(f.old.Node)
	var lease int64
	var until, elected, revoked time.Time
	in := false
	for _, ev := range old {
		switch {
		case ev.Msg == "lease granted" && !in:
			lease = ev.Etcd.Lease
		case ev.Msg == "elected" && ev.Etcd.Token == f.old.Token:
			in, until = true, ev.Etcd.ValidUntil
		case in && ev.Msg == "lease renewed" && ev.Etcd.Lease == lease && ev.Etcd.ValidUntil.After(until):
			until = ev.Etcd.ValidUntil
		case in && ev.Msg == "lease revoked" && ev.Etcd.Lease == lease && revoked.IsZero():
			revoked = ev.Time
		}
	}
	for _, ev := range c.logEvents(f.next.Node) {
		if ev.Msg == "elected" && ev.Etcd.Token == f.next.Token {
			elected = ev.Time
		}
	}
	if !in || lease == 0 || elected.IsZero() {
		return 0, false
	}
	if !revoked.IsZero() && revoked.Before(until) && revoked.Before(elected) {
		return 0, false
	}
	return elected.Sub(until), true
}

// logEvent is what termGap reads of a line of an electd log.
type logEvent struct {
	Time time.Time `json:"time"`
	Msg  string    `json:"msg"`
	Etcd struct {
		Token      uint64    `json:"token"`
		Lease      int64     `json:"lease"`
		ValidUntil time.Time `json:"valid_until"`
	} `json:"etcd"`
}

// logEvents reads node id's electd log (every life of it), skipping lines
// that are not JSON (the harness's banners).
func (c *cluster) logEvents(id string) []logEvent {
	b, err := os.ReadFile(filepath.Join(c.dir, id+".log"))
	if err != nil {
		return nil
	}
	var out []logEvent
	for _, line := range strings.Split(string(b), "\n") {
		var ev logEvent
		if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &ev) == nil {
			out = append(out, ev)
		}
	}
	return out
}
