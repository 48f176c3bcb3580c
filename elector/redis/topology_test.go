package redis

import (
	"context"
	"errors"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/testenv"
)

// Fault tests on real Sentinel and Cluster topologies (internal/testenv).
// In each, three candidates campaign in a loop (electortest.CampaignLoop)
// and every term is recorded: no two may overlap (each ends, Done and
// ValidUntil, before the next begins) and tokens must grow. After a fault,
// a term must begin again within a bound stated below; the figures
// measured are logged.

// Bounds, from what testenv's topologies take on a loaded 2-core machine.
const (
	// firstLeaderBound: a fresh state grants nothing for one TTL (its
	// epoch), then a step grants the head at once.
	firstLeaderBound = 5 * testTTL
	// sentinelFailover: testenv's down-after-milliseconds (2 s), then the
	// sentinels' vote and the promotion; measured 3.3 s after kill -9.
	sentinelFailover = 6 * time.Second
	// clusterFailover: cluster-node-timeout (1 s), then the replica's
	// election; measured 2.1 to 2.8 s after kill -9.
	clusterFailover = 5 * time.Second
	// epochSlack: after a failover the promoted replica's run starts a new
	// epoch, which grants nothing for one TTL; then the client must find
	// the new master (and, with WAIT, a replica must have reconnected to
	// it), and a waiter's next step must run.
	epochSlack = testTTL + 1500*time.Millisecond
)

// TestSentinelMasterDies: the master dies under a leader, (a) right after
// a renewal that a replica acknowledged, or (b) holding renewals that no
// replica has (their links cut while the replicas are stopped, so the
// replica the sentinels promote lacks them). In (b) the renewals do not
// count (WAIT): the leader's deadline stays where the last replicated
// renewal put it. Either way its term ends by its deadline, terms never
// overlap, tokens grow, and a new term begins within failover + one TTL.
func TestSentinelMasterDies(t *testing.T) {
	for _, tc := range []struct {
		name         string
		unreplicated bool
	}{
		{"after an acknowledged renewal", false},
		{"holding unreplicated renewals", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testenv.StartRedisSentinel(t)
			ctx := context.Background()
			inst := &countingInstrument{}
			cands, own := candidates(t, SentinelBackend, sentinelURL(s), "master-dies", testTiming(), inst, "a", "b", "c")
			terms := electortest.CampaignLoop(t, cands...)
			lead := terms.WaitLeading(t, firstLeaderBound)

			masterAddr := s.Master(t)
			var master *testenv.RedisNode
			var replicas []*testenv.RedisNode
			for _, n := range s.Nodes() {
				if n.Addr() == masterAddr {
					master = n
				} else {
					replicas = append(replicas, n)
				}
			}
			mcli := newClient(t, masterAddr)
			// The leader's deadline can rest only on renewals sent before
			// lastReplicated.
			lastReplicated := renewed(t, lead.Term)
			var lostOffset int64 // replication stream only the dead master had
			if tc.unreplicated {
				signal(t, syscall.SIGSTOP, replicas...)
				// Cut their links: stopped, they cannot resync, so nothing
				// written from now on reaches them.
				lastReplicated = time.Now()
				must(t, mcli.ClientKillByFilter(ctx, "TYPE", "replica").Err())
				// The leader's own renewals: two refused, one at least
				// as unreplicated (a WAIT that answers late, under -race
				// on 2 cores, is a timeout instead; it fails the renewal
				// all the same). Each waits 150 ms for WAIT, the first
				// up to a renewal interval after the cut: about 600 ms.
				li := own[lead.ID]
				n, timeouts := li.count("renew", classUnreplicated), li.count("renew", elector.ClassTimeout)
				electortest.Eventually(t, testTTL, "two renewals of the leader refused, one as unreplicated", func() bool {
					u := li.count("renew", classUnreplicated) - n
					return u >= 1 && u+li.count("renew", elector.ClassTimeout)-timeouts >= 2
				})
				off, err := strconv.ParseInt(replication(t, mcli)["master_repl_offset"], 10, 64)
				must(t, err)
				lostOffset = off
			}
			killAt := time.Now()
			master.Kill(t)
			if tc.unreplicated {
				signal(t, syscall.SIGCONT, replicas...)
			}
			newMaster := s.WaitFailover(t, masterAddr, sentinelFailover)
			failedOver := time.Since(killAt)
			next := terms.WaitStarted(t, killAt, time.Until(killAt.Add(sentinelFailover+epochSlack)))
			renewed(t, next.Term) // the new leader holds
			spans := terms.Stop(t)

			old := electortest.SpanOf(t, spans, lead.Token)
			if !errors.Is(old.Err, elector.ErrLeaseExpired) {
				t.Errorf("the old leader's term ended with %v, want its deadline (%v)", old.Err, elector.ErrLeaseExpired)
			}
			if limit := lastReplicated.Add(testTTL); !old.ValidUntil.Before(limit) {
				t.Errorf("the old leader was valid until %s after its last replicated renewal + TTL: an unreplicated renewal counted",
					old.ValidUntil.Sub(limit))
			}
			if tc.unreplicated {
				// The promoted replica's stream ends where its link was cut.
				promoted, err := strconv.ParseInt(replication(t, newClient(t, newMaster))["second_repl_offset"], 10, 64)
				must(t, err)
				if promoted-1 >= lostOffset {
					t.Errorf("the promoted replica had offset %d, the dead master %d: it lacked nothing", promoted-1, lostOffset)
				}
				t.Logf("promoted replica lacked %d bytes of the stream; %d renewals unreplicated", lostOffset-(promoted-1), inst.count("renew", classUnreplicated))
			}
			t.Logf("kill -9 → sentinels' failover %s; old term valid until kill+%s; new term (%s, token %d → %d) %s after the kill; %d terms; errors %v",
				failedOver.Round(time.Millisecond), old.ValidUntil.Sub(killAt).Round(time.Millisecond), next.ID, old.Token, next.Token,
				next.Start.Sub(killAt).Round(time.Millisecond), len(spans), inst.snapshot())
		})
	}
}

// TestClusterFailover: the master owning the election's slot fails over,
// killed (-9) right after a renewal, or by a coordinated CLUSTER FAILOVER.
// Killed: the leader's term ends by its deadline and a new term begins
// within failover + one TTL. Coordinated (no write lost, faster than the
// TTL): the leader keeps its term, its renewals resuming on the new master.
func TestClusterFailover(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ttl   time.Duration
		fail  func(*testenv.Cluster, testing.TB, int) *testenv.RedisNode
		keeps bool // the leader keeps its term
	}{
		{"kill -9", testTTL, (*testenv.Cluster).Failover, false},
		// A longer TTL, so that the handover (measured 0.4 s) fits in
		// one with room to spare.
		{"manual", 2 * testTTL, (*testenv.Cluster).ManualFailover, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testenv.StartRedisCluster(t)
			inst := &countingInstrument{}
			const election = "failover"
			cands, _ := candidates(t, ClusterBackend, clusterURL(c), election, elector.Timing{TTL: tc.ttl}, inst, "a", "b", "c")
			terms := electortest.CampaignLoop(t, cands...)
			lead := terms.WaitLeading(t, 5*tc.ttl)
			renewed(t, lead.Term)
			at := time.Now()
			newMaster := tc.fail(c, t, electionSlot(election))
			failedOver := time.Since(at)
			if tc.keeps {
				resumed := renewed(t, lead.Term).Sub(at)
				electortest.Eventually(t, 2*tc.ttl, "the lease renewed a TTL past the failover", func() bool {
					return lead.Term.ValidUntil().After(at.Add(failedOver + tc.ttl))
				})
				stillLeads(t, terms, lead, "after the failover")
				spans := terms.Stop(t)
				t.Logf("manual failover to %s in %s; %s kept its term, its first renewal after it acknowledged %s after CLUSTER FAILOVER was sent; %d terms; errors %v",
					newMaster, failedOver.Round(time.Millisecond), lead.ID, resumed.Round(time.Millisecond), len(spans), inst.snapshot())
				return
			}
			next := terms.WaitStarted(t, at, time.Until(at.Add(clusterFailover+epochSlack)))
			renewed(t, next.Term)
			spans := terms.Stop(t)
			old := electortest.SpanOf(t, spans, lead.Token)
			if !errors.Is(old.Err, elector.ErrLeaseExpired) {
				t.Errorf("the old leader's term ended with %v, want its deadline (%v)", old.Err, elector.ErrLeaseExpired)
			}
			t.Logf("kill -9 → slot on %s after %s; old term valid until kill+%s; new term (%s, token %d → %d) %s after the kill; %d terms; errors %v",
				newMaster, failedOver.Round(time.Millisecond), old.ValidUntil.Sub(at).Round(time.Millisecond), next.ID, old.Token, next.Token,
				next.Start.Sub(at).Round(time.Millisecond), len(spans), inst.snapshot())
		})
	}
}

// TestClusterReshard: the election's slot moves to another master during a
// term. Mid-migration (the keys split between the two) renewals are
// refused and retried, and the term holds; afterwards the renewals reach
// the new owner, which has the whole state, and the leader keeps its term.
func TestClusterReshard(t *testing.T) {
	c := testenv.StartRedisCluster(t)
	inst := &countingInstrument{}
	const election = "reshard"
	slot := electionSlot(election)
	cands, own := candidates(t, ClusterBackend, clusterURL(c), election, testTiming(), inst, "a", "b", "c")
	terms := electortest.CampaignLoop(t, cands...)
	lead := terms.WaitLeading(t, firstLeaderBound)
	src := c.MasterOf(t, slot)
	var to *testenv.RedisNode
	for _, m := range c.Masters(t) {
		if m != src {
			to = m
			break
		}
	}
	renewed(t, lead.Term)
	var midErrs map[string]int
	at := time.Now()
	c.Reshard(t, slot, to, func() {
		li := own[lead.ID]
		n := li.n.Load()
		// A refused renewal takes up to a call timeout (the cluster client
		// re-sends on TRYAGAIN), so two take 370–510 ms here: the bound is
		// the term's own deadline, which must outlast them.
		electortest.Eventually(t, time.Until(lead.Term.ValidUntil()), "two renewals of the leader refused mid-migration, before the term's deadline", func() bool { return li.n.Load() >= n+2 })
		midErrs = li.snapshot()
		stillLeads(t, terms, lead, "mid-migration")
		if !lead.Term.ValidUntil().After(time.Now()) {
			t.Fatalf("mid-migration: the term's deadline has passed")
		}
	})
	moved := time.Since(at)
	resumed := renewed(t, lead.Term).Sub(at)
	electortest.Eventually(t, 2*testTTL, "the lease renewed a TTL past the reshard", func() bool {
		return lead.Term.ValidUntil().After(at.Add(moved + testTTL))
	})
	stillLeads(t, terms, lead, "after the reshard")
	if n, err := newClient(t, to.Addr()).Exists(context.Background(), keysFor(election).term).Result(); err != nil || n != 1 {
		t.Fatalf("the term's key on the new owner %s: %d, %v", to, n, err)
	}
	spans := terms.Stop(t)
	t.Logf("slot %d moved %s → %s in %s (the leader's errors mid-migration %v); the first renewal after it acknowledged %s after it began; %s kept its term; %d terms",
		slot, src, to, moved.Round(time.Millisecond), midErrs, resumed.Round(time.Millisecond), lead.ID, len(spans))
}
