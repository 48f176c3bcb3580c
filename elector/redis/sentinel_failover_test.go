package redis

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/testenv"
)

// Issue 24: a failover in which the old master keeps a replica. The
// sentinels (or, emulated, an operator) promote replica R and name it the
// master, so that a new connection goes to R, while old master M keeps a
// replica (R3) for a while: the leader's renewals on M, over its pooled
// connection, still pass WAIT 1, and a candidate that lands on R is
// granted one TTL after R's new epoch began. Before the sentinels had to
// confirm each step (sentinels.go), the candidate was granted while the
// leader's ValidUntil still ran.

// planned is the topology of these tests: a master and three replicas,
// whose sentinels move one replica at a time (parallel-syncs 1).
var planned = testenv.SentinelOptions{Replicas: 3, ParallelSyncs: 1}

// failoverBound bounds the wait for the candidate on the new master: the
// failover (its reconfiguration lasts up to testenv's failover-timeout,
// 3 s, per replica, with a slowed resync), then the new master's epoch
// (one TTL).
const failoverBound = 30 * time.Second

func TestSentinelFailoverWithReplicasLeftOnOldMaster(t *testing.T) {
	for _, tc := range []struct {
		name string
		// promote fails the master over while a replica stays on it, and
		// returns the new master and the URL a new candidate dials to
		// land on it.
		promote func(t *testing.T, s *testenv.Sentinel, old string) (string, string)
	}{
		{"SENTINEL FAILOVER", failoverBySentinel},
		{"promoted by hand", promoteByHand},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testenv.StartRedisSentinelWith(t, planned)
			ctx := context.Background()
			old := s.Master(t)
			inst := &countingInstrument{}
			l := electortest.DialURL(t, SentinelBackend, sentinelURL(s), elector.Candidate{
				Election: "planned", ID: "l", Address: "http://l.test", Timing: testTiming(), Instrument: inst})
			lead := electortest.MustLead(t, electortest.Campaign(ctx, l), firstLeaderBound, "l")
			renewed(t, lead.Term)

			promoted, url := tc.promote(t, s, old)
			c := electortest.DialURL(t, SentinelBackend, url, elector.Candidate{
				Election: "planned", ID: "c", Address: "http://c.test", Timing: testTiming()})
			next := electortest.MustLead(t, electortest.Campaign(ctx, c), failoverBound, "c")
			lValid, lErr := lead.Term.ValidUntil(), lead.Term.Err()
			left := replication(t, newClient(t, old))["connected_slaves"]
			if overlap := lValid.Sub(next.At); overlap > 0 {
				t.Fatalf("c granted on %s at %s; l (on %s, %s replica(s) left, term err %v) valid until %s: overlap %s",
					promoted, next.At.Format("15:04:05.000"), old, left, lErr, lValid.Format("15:04:05.000"), overlap.Round(time.Millisecond))
			}
			if lErr == nil {
				t.Fatalf("l's term had not ended when c was granted")
			}
			// The sentinels ended it, not the old master losing its
			// replicas.
			unconfirmed := inst.count("renew", classUnconfirmed)
			if unconfirmed == 0 {
				t.Fatalf("l's renewals were never refused as %s (errors %v)", classUnconfirmed, inst.snapshot())
			}
			t.Logf("l's term ended (%v) valid until %s, %d renewals unconfirmed; c granted on %s %s later (token %d → %d), %s replica(s) still on the old master %s",
				lErr, lValid.Format("15:04:05.000"), unconfirmed, promoted, next.At.Sub(lValid).Round(time.Millisecond),
				lead.Term.Token, next.Term.Token, left, old)
		})
	}
}

// failoverBySentinel runs SENTINEL FAILOVER on the sentinel the leader's
// client follows (the one it asked first, and whose +switch-master it
// awaits: the one that fails over announces the switch last, when every
// replica has moved) while a full resync takes 2 s (a large data set,
// emulated with repl-diskless-sync-delay). With parallel-syncs 1 the last
// replica stays on the old master until the first one moved has synced
// with the new master and the sentinel has seen it (its next INFO, within
// 1 s): by then the new master has the replica its WAIT needs. The new
// candidate asks that sentinel alone, which names the promoted replica
// from the reconfiguration on.
func failoverBySentinel(t *testing.T, s *testenv.Sentinel, old string) (string, string) {
	t.Helper()
	ctx := context.Background()
	for _, n := range s.Nodes() {
		if n.Addr() != old {
			must(t, newClient(t, n.Addr()).ConfigSet(ctx, "repl-diskless-sync-delay", "2").Err())
		}
	}
	followed := subscribedSentinel(t, s)
	leader := redis.NewSentinelClient(&redis.Options{Addr: followed})
	t.Cleanup(func() { _ = leader.Close() })
	must(t, leader.Failover(ctx, s.MasterName()).Err())
	var promoted string
	electortest.Eventually(t, failoverBound, "the sentinel to name the promoted replica", func() bool {
		hp, err := leader.GetMasterAddrByName(ctx, s.MasterName()).Result()
		if err != nil || len(hp) != 2 {
			return false
		}
		promoted = net.JoinHostPort(hp[0], hp[1])
		return promoted != old
	})
	return promoted, sentinelURL(s, followed)
}

// subscribedSentinel returns the one sentinel that has a subscriber (a
// failover client listens there for +switch-master; the sentinels and
// testenv subscribe to none).
func subscribedSentinel(t *testing.T, s *testenv.Sentinel) string {
	t.Helper()
	var found []string
	electortest.Eventually(t, 5*time.Second, "one sentinel with a subscriber", func() bool {
		found = found[:0]
		for _, a := range s.SentinelAddrs() {
			list, err := newClient(t, a).ClientList(context.Background()).Result()
			if err != nil {
				return false
			}
			for line := range strings.SplitSeq(list, "\n") {
				if strings.Contains(line, " sub=") && !strings.Contains(line, " sub=0 ") {
					found = append(found, a)
					break
				}
			}
		}
		return len(found) == 1
	})
	return found[0]
}

// promoteByHand does what the review did: replica R is promoted (REPLICAOF
// NO ONE), R2 moved to it, R3 left on the old master; then every sentinel
// is pointed at R (SENTINEL REMOVE, MONITOR), as the sentinels name the
// promoted replica during a failover.
func promoteByHand(t *testing.T, s *testenv.Sentinel, old string) (string, string) {
	t.Helper()
	ctx := context.Background()
	var replicas []string
	for _, n := range s.Nodes() {
		if n.Addr() != old {
			replicas = append(replicas, n.Addr())
		}
	}
	r, r2 := replicas[0], replicas[1]
	host, port, err := net.SplitHostPort(r)
	must(t, err)
	must(t, newClient(t, r).SlaveOf(ctx, "NO", "ONE").Err())
	must(t, newClient(t, r2).SlaveOf(ctx, host, port).Err())
	for _, a := range s.SentinelAddrs() {
		cli := redis.NewSentinelClient(&redis.Options{Addr: a})
		must(t, cli.Remove(ctx, s.MasterName()).Err())
		must(t, cli.Monitor(ctx, s.MasterName(), host, port, "2").Err())
		_ = cli.Close()
	}
	electortest.Eventually(t, failoverBound, r2+" to replicate "+r, func() bool {
		return replication(t, newClient(t, r2))["master_link_status"] == "up"
	})
	return r, sentinelURL(s)
}
