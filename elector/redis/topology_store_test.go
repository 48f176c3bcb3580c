package redis

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector/backend"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/testenv"
)

// More fault tests on real Sentinel and Cluster topologies: see
// topology_test.go.

// TestTopologyTransientErrorsKeepTheTerm: the master that holds the
// election refuses writes (MISCONF: it cannot persist; OOM) for less than
// the TTL. The leader's renewals fail and are retried, and its term
// survives the fault and one more TTL; no other term begins.
func TestTopologyTransientErrorsKeepTheTerm(t *testing.T) {
	faults := []struct {
		class  string
		inject func(*testing.T, *redis.Client) func()
	}{
		{"MISCONF", injectUnpersistable},
		{"OOM", injectOOM},
	}
	// master is a client of the master that holds election.
	type master = func(t *testing.T, election string) *redis.Client
	for _, topo := range []struct {
		name  string
		start func(t *testing.T) (backend.Backend, string, master)
	}{
		{"sentinel", func(t *testing.T) (backend.Backend, string, master) {
			s := testenv.StartRedisSentinel(t)
			return SentinelBackend, sentinelURL(s), func(t *testing.T, _ string) *redis.Client { return newClient(t, s.Master(t)) }
		}},
		{"cluster", func(t *testing.T) (backend.Backend, string, master) {
			c := testenv.StartRedisCluster(t)
			return ClusterBackend, clusterURL(c), func(t *testing.T, el string) *redis.Client {
				return newClient(t, c.MasterOf(t, electionSlot(el)).Addr())
			}
		}},
	} {
		t.Run(topo.name, func(t *testing.T) {
			b, url, master := topo.start(t)
			for _, f := range faults {
				t.Run(f.class, func(t *testing.T) {
					election := "transient-" + f.class
					inst := &countingInstrument{}
					cands, own := candidates(t, b, url, election, testTiming(), inst, "a", "b", "c")
					terms := electortest.CampaignLoop(t, cands...)
					lead := terms.WaitLeading(t, firstLeaderBound)
					cli := master(t, election)
					renewed(t, lead.Term)
					at := time.Now()
					lift := f.inject(t, cli)
					electortest.Eventually(t, testTTL/2, "two renewals of the leader refused with "+f.class, func() bool {
						return own[lead.ID].count("renew", f.class) >= 2
					})
					lift()
					lasted := time.Since(at)
					stillLeads(t, terms, lead, "when the fault was lifted")
					liftedAt := time.Now()
					electortest.Eventually(t, 2*testTTL, "the lease renewed a TTL past the fault", func() bool {
						return lead.Term.ValidUntil().After(liftedAt.Add(testTTL))
					})
					stillLeads(t, terms, lead, "one TTL after the fault")
					spans := terms.Stop(t)
					t.Logf("%s for %s: %s kept its term; %d terms; errors %v", f.class, lasted.Round(time.Millisecond), lead.ID, len(spans), inst.snapshot())
				})
			}
		})
	}
}

// sentinelInfoPeriod is how often a sentinel sends INFO to the master it
// monitors (fixed in Redis): when it learns a restarted master's run_id.
const sentinelInfoPeriod = 10 * time.Second

// TestSentinelTokensSurviveALaggingClock: tokens were issued from a token
// key an hour ahead of the clock; then every data node restarts empty. The
// next term's token is still above every earlier one: the candidates carry
// the highest token they saw into their next step.
func TestSentinelTokensSurviveALaggingClock(t *testing.T) {
	s := testenv.StartRedisSentinel(t)
	ctx := context.Background()
	const election = "lag"
	ahead := uint64(time.Now().Add(time.Hour).UnixMicro())
	must(t, newClient(t, s.Master(t)).Set(ctx, keysFor(election).token, fmt.Sprint(ahead), 0).Err())
	cands, _ := candidates(t, SentinelBackend, sentinelURL(s), election, testTiming(), nil, "a", "b", "c")
	terms := electortest.CampaignLoop(t, cands...)
	lead := terms.WaitLeading(t, firstLeaderBound)
	if lead.Token <= ahead {
		t.Fatalf("first token %d, want above the stored %d", lead.Token, ahead)
	}
	electortest.Eventually(t, 2*testTTL, "every candidate to see the leader's token", func() bool {
		for _, e := range cands {
			if e.(*Elector).core.Seen() < lead.Token {
				return false
			}
		}
		return true
	})
	killAt := time.Now()
	s.Kill(t)
	s.Start(t) // empty: the token key is gone, and TIME is an hour behind it
	back := time.Now()
	// The restarted master has a new run_id, which each sentinel reads only
	// at its next INFO of it (every 10 s): until then it does not confirm a
	// step (sentinels.go), so a term may wait that long on top.
	next := terms.WaitStarted(t, killAt, time.Until(back.Add(firstLeaderBound+sentinelInfoPeriod)))
	now, err := newClient(t, s.Master(t)).Time(ctx).Result()
	must(t, err)
	if uint64(now.UnixMicro()) >= lead.Token {
		t.Fatalf("the server's clock (%d) is not behind the last token (%d): the test proves nothing", now.UnixMicro(), lead.Token)
	}
	spans := terms.Stop(t) // checks that tokens grew
	t.Logf("tokens %d → %d across a restart of every data node onto a clock %s behind; new term %s after the kill (the restart took %s); %d terms",
		lead.Token, next.Token, time.Duration(lead.Token-uint64(now.UnixMicro()))*time.Microsecond,
		next.Start.Sub(killAt).Round(time.Millisecond), back.Sub(killAt).Round(time.Millisecond), len(spans))
}
