package redis

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/faultproxy"
	"github.com/electd/electd/internal/testenv"
)

// TestFailbackToTheSameRunStartsAnEpoch: a master (A) fails over to a
// replica (B) that lacks its last writes, and back again, without
// restarting: A, now holding B's older copy of the state, is master
// again with the run_id that state names. The leader's deadline rests on
// renewals only A had (acknowledged, then lost); the leader is cut off
// meanwhile. Were the epoch keyed by run_id alone, a waiter would be
// granted as soon as the leader's older deadline in that copy passed,
// while the leader still held a valid term. The replication ID, which
// changes at every promotion, starts a new epoch instead.
func TestFailbackToTheSameRunStartsAnEpoch(t *testing.T) {
	a, b := testenv.StartRedis(t), testenv.StartRedis(t)
	ctx := context.Background()
	acli, bcli := newClient(t, a.Addr()), newClient(t, b.Addr())
	for _, c := range [][]string{{"repl-diskless-sync-delay", "0"}, {"replica-serve-stale-data", "yes"}} {
		must(t, acli.ConfigSet(ctx, c[0], c[1]).Err())
		must(t, bcli.ConfigSet(ctx, c[0], c[1]).Err())
	}
	aHost, aPort := hostPort(t, a.Addr())
	must(t, bcli.SlaveOf(ctx, aHost, aPort).Err())
	linkUp(t, bcli)

	const election = "failback"
	proxies := map[string]*faultproxy.Proxy{}
	var cands []elector.Elector
	for _, id := range []string{"a", "b", "c"} {
		p := faultproxy.Start(t, a.Addr())
		proxies[id] = p
		cands = append(cands, electortest.Dial(t, Backend, electortest.Candidate{StoreAddr: p.Addr(), Candidate: elector.Candidate{
			Election: election, ID: id, Timing: testTiming()}}))
	}
	terms := electortest.CampaignLoop(t, cands...)
	lead := terms.WaitLeading(t, firstLeaderBound)
	renewed(t, lead.Term)

	// B stops replicating (its master now does not answer) and keeps the
	// state as it is; the leader renews twice more on A alone.
	must(t, bcli.SlaveOf(ctx, "127.0.0.1", strconv.Itoa(testenv.FreePort(t))).Err())
	detached := time.Now()
	renewed(t, lead.Term)
	renewed(t, lead.Term)
	proxies[lead.ID].Cut() // the leader can no longer renew, nor learn anything
	cutAt := time.Now()

	// Fail over to B, and back to A, which resyncs B's older copy.
	must(t, bcli.SlaveOf(ctx, "NO", "ONE").Err())
	bHost, bPort := hostPort(t, b.Addr())
	must(t, acli.SlaveOf(ctx, bHost, bPort).Err())
	linkUp(t, acli)
	must(t, acli.SlaveOf(ctx, "NO", "ONE").Err())
	back := time.Now()

	// The leader's term ends at its deadline (it is cut off); the next
	// term must not begin before.
	next := terms.WaitStarted(t, cutAt, 5*testTTL)
	select {
	case <-lead.Term.Done():
	case <-time.After(2 * testTTL):
		t.Fatal("the cut-off leader's term outlived its deadline")
	}
	proxies[lead.ID].Heal()
	spans := terms.Stop(t)
	old := electortest.SpanOf(t, spans, lead.Token)
	// The first script on A after its promotion starts the epoch, at
	// most a round trip before back.
	if epoch := back.Add(testTTL - 50*time.Millisecond); next.Start.Before(epoch) {
		t.Errorf("the next term began %s before one TTL after A was master again", epoch.Sub(next.Start))
	}
	t.Logf("B detached at 0; leader cut off at %s; A master again at %s; leader valid until %s; next term (%s) at %s",
		cutAt.Sub(detached).Round(time.Millisecond), back.Sub(detached).Round(time.Millisecond),
		old.ValidUntil.Sub(detached).Round(time.Millisecond), next.ID, next.Start.Sub(detached).Round(time.Millisecond))
}

// hostPort splits addr.
func hostPort(t *testing.T, addr string) (string, string) {
	t.Helper()
	h, p, ok := strings.Cut(addr, ":")
	if !ok {
		t.Fatalf("address %q has no port", addr)
	}
	return h, p
}

// linkUp waits until the replica behind cli has synced with its master.
func linkUp(t *testing.T, cli *redis.Client) {
	t.Helper()
	electortest.Eventually(t, 5*time.Second, "the replica's link up", func() bool {
		return replication(t, cli)["master_link_status"] == "up"
	})
}
