package torture

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// injectMember applies and heals one of the etcd cluster's own faults: a
// member, the raft leader or a follower, killed or cut off from its two
// peers, or slowed on its peer links. Each is healed once every member
// follows one leader again (testenv's WaitHealthy).
func (c *cluster) injectMember(f *fault, rng *rand.Rand) {
	t, ec := c.t, c.s.EtcdCluster
	size := len(ec.Members())
	lead := ec.Leader(t)
	target := lead
	switch f.kind {
	case killRaftFollower, partitionRaftFollower:
		target = (lead + 1 + rng.IntN(size-1)) % size
	case slowMember:
		target = rng.IntN(size)
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
	ec := c.s.EtcdCluster
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
