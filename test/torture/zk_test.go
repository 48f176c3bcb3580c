package torture

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/electd/electd/internal/testenv"
)

// The ZooKeeper ensemble's own faults (issue 30), drawn only on it. The
// faults of a single store apply to both ZooKeeper entries: store-restart
// kills -9 the standalone server, or every member of the ensemble at once,
// and starts them again on their data.
const (
	killZKLeader   kind = "kill-zk-leader"   // kill -9 the ensemble's leader; start it again 0–1.5 TTL after the kill, once the others lead
	killZKFollower kind = "kill-zk-follower" // kill -9 a follower (half of the time the one the electd leader's session uses)
	rollingZK      kind = "rolling-zk"       // kill -9 and start every member, one after another, each once the others form a quorum again
	partitionZK    kind = "partition-zk"     // cut one member off from its peers, both ways, for 0.5–2.5 TTL (clients still reach it)
)

// zkKinds are the ensemble's own kinds.
var zkKinds = []kind{killZKLeader, killZKFollower, rollingZK, partitionZK}

// zkWait bounds the harness's waits on the ensemble: a member's start
// (testenv's own bound is a minute on a loaded host) and a new leader.
const zkWait = time.Minute

// zkEnsemble is the store's ZooKeeper ensemble (its own faults').
func (c *cluster) zkEnsemble() *testenv.ZKEnsemble { return topology[*testenv.ZKEnsemble](c) }

// aboutZK says, for the figures, what the ensemble is and how the nodes
// reach it.
func (c *cluster) aboutZK() string {
	return fmt.Sprintf("a ZooKeeper ensemble of %d servers (tickTime 200 ms, syncLimit 5), on their data across restarts; "+
		"every node reaches each member through a fault proxy of its own and its client uses one member at a time, "+
		"so cut-leader, slow-leader and reset-leader act on all of its proxies, and the cut is not timed to a reply",
		len(c.zkEnsemble().Members()))
}

// injectZK applies and heals one of the ensemble's own faults. Each is
// healed once every member serves again, one as the leader and the others
// as its followers (awaitZKQuorum).
func (c *cluster) injectZK(f *fault, rng *rand.Rand, lead *node) {
	t, e := c.t, c.zkEnsemble()
	f.target = ""
	switch f.kind {
	case killZKLeader, killZKFollower:
		i, why := c.zkTarget(f, rng, lead)
		m, d := e.Members()[i], between(rng, c.cfg.ttl, 0, 1.5)
		f.note = fmt.Sprintf("z%d (%s), down %s", i, why, d)
		f.at = time.Now()
		m.Kill(t)
		if f.kind == killZKLeader {
			now := c.awaitZKLeader(f, i)
			f.note += fmt.Sprintf("; z%d led after %s", now, ms(time.Since(f.at)))
		}
		time.Sleep(time.Until(f.at.Add(d))) // the member's absence is the experiment
		m.Start(t)
		f.note += fmt.Sprintf("; serving again %s after the kill", ms(time.Since(f.at)))
		c.awaitZKQuorum(f)
		f.healed = time.Now()
		f.note += fmt.Sprintf("; %s after the heal", c.zkModes())

	case rollingZK:
		order := rng.Perm(len(e.Members()))
		f.note = fmt.Sprintf("members in the order %v", order)
		f.at = time.Now()
		for _, i := range order {
			e.Members()[i].Kill(t)
			e.Members()[i].Start(t)
			c.awaitZKQuorum(f)
		}
		f.healed = time.Now()
		f.note += fmt.Sprintf("; took %s; %s after it", ms(f.healed.Sub(f.at)), c.zkModes())

	case partitionZK:
		c.injectZKPartition(f, rng, lead)
	}
}

// zkTarget picks the member f acts on, and says which it is: the leader
// (killZKLeader); a follower, half of the time the one the electd leader
// lead's session is connected to (its proxy carries its renewals) when
// that is a follower (killZKFollower); half of the time the one lead's
// session uses, else any (partitionZK).
func (c *cluster) zkTarget(f *fault, rng *rand.Rand, lead *node) (int, string) {
	e := c.zkEnsemble()
	leader := c.zkLeaderIndex(f)
	switch f.kind {
	case partitionZK:
		if used, ok := c.zkInUse(lead); ok && rng.IntN(2) == 0 {
			return used, "the member " + lead.id + "'s session uses, " + zkRole(used == leader)
		}
		i := rng.IntN(len(e.Members()))
		return i, zkRole(i == leader)
	case killZKLeader:
		if used, ok := c.zkInUse(lead); ok && used == leader {
			return leader, "the leader, which " + lead.id + "'s session uses"
		}
		return leader, "the leader"
	}
	if rng.IntN(2) == 0 {
		if used, ok := c.zkInUse(lead); ok && used != leader {
			return used, "a follower, which " + lead.id + "'s session uses"
		}
	}
	i := (leader + 1 + rng.IntN(len(e.Members())-1)) % len(e.Members())
	return i, "a follower"
}

// zkInUse is the member whose proxy carried something to n within two
// renew intervals: the one its client is connected to.
func (c *cluster) zkInUse(n *node) (int, bool) {
	before := make([]int64, len(n.proxies))
	for i, px := range n.proxies {
		before[i] = px.Stats().BytesDown
	}
	for end := time.Now().Add(2 * c.cfg.renew); time.Now().Before(end); {
		for i, px := range n.proxies {
			if px.Stats().BytesDown != before[i] {
				return i, true
			}
		}
		time.Sleep(time.Millisecond) // polling counters with a deadline
	}
	return -1, false
}

// zkLeaderIndex is the index of the member that leads the ensemble now
// (waiting for one: testenv's Leader).
func (c *cluster) zkLeaderIndex(f *fault) int {
	e := c.zkEnsemble()
	l := e.Leader(c.t)
	for i, m := range e.Members() {
		if m == l {
			return i
		}
	}
	c.fatalf(f, "zookeeper leader %s is not a member", l.Addr())
	return -1
}

// awaitZKLeader waits until the members other than old (killed) follow a
// new leader among them, and returns its index.
func (c *cluster) awaitZKLeader(f *fault, old int) int {
	now, ok := c.awaitZKLeaderBy(old, time.Now().Add(zkWait))
	if !ok {
		c.fatalf(f, "the other members followed no new leader within %s: %s", zkWait, c.zkModes())
	}
	return now
}

// awaitZKQuorum waits until every member serves, one as the leader and the
// others as its followers.
func (c *cluster) awaitZKQuorum(f *fault) {
	c.pollFor(f, zkWait, "every member to serve under one leader", func(context.Context) error {
		leaders := 0
		for i, m := range c.zkEnsemble().Members() {
			switch mode := m.Mode(); mode {
			case "leader":
				leaders++
			case "follower":
			default:
				return fmt.Errorf("z%d is %q", i, mode)
			}
		}
		if leaders != 1 {
			return fmt.Errorf("%d leaders", leaders)
		}
		return nil
	})
}

// zkModes lists every member's mode ("z0 follower, z1 leader, …").
func (c *cluster) zkModes() string {
	var out []string
	for i, m := range c.zkEnsemble().Members() {
		out = append(out, fmt.Sprintf("z%d %s", i, m.Mode()))
	}
	return strings.Join(out, ", ")
}

// zkRole names a member's role.
func zkRole(leads bool) string {
	if leads {
		return "the leader"
	}
	return "a follower"
}
