package redis

// The epoch rule (rediskit.EpochLua): a fresh election on a server electd
// has used for longer than a TTL is granted at once; wherever state may
// have been lost, no term is granted for one TTL, and the campaign says why.

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/elector/internal/rediskit"
	"github.com/electd/electd/internal/testenv"
)

// TestFreshNameGrantedAtOnce: on a server whose run electd has known for
// longer than a TTL, a name never used before is granted in under 100 ms,
// whatever the TTL (before, every new name waited one TTL: 15.4 s for
// `electd lock --wait 0` with the default --ttl). The server's first use
// by electd still waits, and says why.
func TestFreshNameGrantedAtOnce(t *testing.T) {
	const longest = 15 * time.Second
	srv, cli := startRedis(t)
	ctx := context.Background()
	in := func(election string, ttl time.Duration, log *slog.Logger) *Elector {
		return newElectorWith(t, Config{Client: newClient(t, srv.Addr()), Candidate: elector.Candidate{
			Election: election, ID: "a", Timing: elector.Timing{TTL: ttl}, Logger: log}})
	}

	logs, log := electortest.NewLogs()
	start := time.Now()
	first := electortest.MustLead(t, electortest.Campaign(ctx, in("first", 2*time.Second, log)), 10*time.Second, "first")
	if took := first.At.Sub(start); took < 2*time.Second-50*time.Millisecond {
		t.Errorf("the server's first election was granted after %s, within its first TTL", took)
	}
	if got := logs.Lines(electortest.Line(slog.LevelInfo, rediskit.EpochWaitMsg, "", "")); len(got) != 1 || got[0].Attrs["why"].String() == "" {
		t.Errorf("the first use logged %d epoch lines (%v), want 1 with why", len(got), got)
	}
	electortest.Resign(t, first.Term)
	at := serverRecordAt(t, cli)
	electortest.Eventually(t, longest+5*time.Second, "the server record to be older than "+longest.String(),
		func() bool { return serverNow(t, cli).After(at.Add(longest)) })

	tests := []struct {
		name string
		ttl  time.Duration
		try  bool
	}{
		{name: "ttl 2s", ttl: 2 * time.Second},
		{name: "ttl 15s", ttl: longest},
		{name: "try with ttl 15s", ttl: longest, try: true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs, log := electortest.NewLogs()
			e := in("fresh-"+strconv.Itoa(i), tt.ttl, log)
			campaign := e.Campaign
			if tt.try {
				campaign = e.TryCampaign
			}
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			start := time.Now()
			term, err := campaign(cctx)
			took := time.Since(start)
			if err != nil {
				t.Fatalf("a fresh name was not granted within 2 s (ttl %s): %v", tt.ttl, err)
			}
			if took > 100*time.Millisecond {
				t.Errorf("a fresh name was granted after %s, want under 100 ms (ttl %s)", took, tt.ttl)
			}
			if got := logs.Lines(electortest.Line(slog.LevelInfo, rediskit.EpochWaitMsg, "", "")); len(got) != 0 {
				t.Errorf("a campaign that did not wait logged %v", got)
			}
			t.Logf("ttl %s: granted in %s", tt.ttl, took.Round(10*time.Microsecond))
			electortest.Resign(t, term)
		})
	}
}

// TestEpochWhereStateMayBeLost: a leads an election on a server electd
// has known for a TTL; then its state may be lost, while a is cut off
// (its renewals held, so no step of its own shows the loss first, and its
// ValidUntil stands). b, a new candidate with no step and no token seen,
// must not be granted before a's ValidUntil, and its campaign says why it
// waits. A name that looks new there (no born record) is not new.
func TestEpochWhereStateMayBeLost(t *testing.T) {
	const election = "lost"
	const ttl = 2 * time.Second
	del := func(keys ...string) func(t *testing.T, cli *redis.Client) {
		return func(t *testing.T, cli *redis.Client) { must(t, cli.Del(context.Background(), keys...).Err()) }
	}
	tests := []struct {
		name string
		// lose loses the state on the server (srv, cli); with promote,
		// the replica is promoted instead, and b campaigns there.
		lose    func(t *testing.T, cli *redis.Client)
		restart bool
		promote bool
		why     string
	}{
		{name: "restarted empty", restart: true, why: "restarted"},
		{name: "the election's keys deleted", lose: del(keysFor(election).all()...), why: "vanished"},
		{name: "FLUSHDB", lose: func(t *testing.T, cli *redis.Client) { must(t, cli.FlushDB(context.Background()).Err()) }, why: "unrecorded"},
		{name: "FLUSHALL", lose: func(t *testing.T, cli *redis.Client) { must(t, cli.FlushAll(context.Background()).Err()) }, why: "unrecorded"},
		{name: "every electd key deleted", lose: del(append(keysFor(election).all(), keysFor(election).server)...), why: "unrecorded"},
		{name: "a replica that lacks the election promoted", promote: true, why: "run"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			srv, cli := startRedis(t)
			var replica *testenv.Redis
			if tt.promote {
				replica = startReplicaOf(t, srv, cli)
			}
			// electd's first use of the server: one TTL.
			warm := newElectorWith(t, Config{Client: newClient(t, srv.Addr()), Candidate: elector.Candidate{
				Election: "warm", ID: "w", Timing: elector.Timing{TTL: ttl}}})
			electortest.Resign(t, electortest.MustLead(t, electortest.Campaign(ctx, warm), 5*ttl, "w").Term)
			if tt.promote {
				// The replica has the server record, then stops
				// replicating before a's election begins.
				rcli := newClient(t, replica.Addr())
				linkUp(t, rcli)
				must(t, rcli.SlaveOf(ctx, "127.0.0.1", strconv.Itoa(testenv.FreePort(t))).Err())
			}

			g, ra := gatedLeader(ctx, t, srv.Addr(), election, ttl)
			renewed(t, ra.Term)

			g.shut(t) // a is cut off: its ValidUntil stands
			validUntil := ra.Term.ValidUntil()
			bAddr := srv.Addr()
			switch {
			case tt.restart:
				srv.Restart(t)
			case tt.promote:
				must(t, newClient(t, replica.Addr()).SlaveOf(ctx, "NO", "ONE").Err())
				bAddr = replica.Addr()
			default:
				tt.lose(t, cli)
			}
			lost := time.Now()
			if !validUntil.After(lost) {
				t.Fatalf("a's term was not valid when the state was lost (valid until %s before)", lost.Sub(validUntil))
			}

			logs, log := electortest.NewLogs()
			b := newElectorWith(t, Config{Client: newClient(t, bAddr), Candidate: elector.Candidate{
				Election: election, ID: "b", Timing: elector.Timing{TTL: ttl}, Logger: log}})
			rb := electortest.MustLead(t, electortest.Campaign(ctx, b), 5*ttl, "b")
			if rb.At.Before(validUntil) {
				t.Errorf("b was granted %s after the loss, while a's term was valid for %s more",
					rb.At.Sub(lost).Round(time.Millisecond), validUntil.Sub(rb.At).Round(time.Millisecond))
			}
			waits := logs.Lines(electortest.Line(slog.LevelInfo, rediskit.EpochWaitMsg, "", ""))
			if len(waits) != 1 {
				t.Fatalf("b logged %d epoch waits, want 1", len(waits))
			}
			if want := rediskit.EpochWhy(tt.why); waits[0].Attrs["why"].String() != want {
				t.Errorf("b's wait says why %q, want %q", waits[0].Attrs["why"], want)
			}
			t.Logf("a valid until %s after the loss; b led %s after it, and said: %s until %s",
				validUntil.Sub(lost).Round(time.Millisecond), rb.At.Sub(lost).Round(time.Millisecond),
				waits[0].Attrs["why"], waits[0].Attrs["until"])
			electortest.Resign(t, rb.Term)
		})
	}
}

// startReplicaOf starts a redis-server replicating srv (cli).
func startReplicaOf(t *testing.T, srv *testenv.Redis, cli *redis.Client) *testenv.Redis {
	t.Helper()
	ctx := context.Background()
	r := testenv.StartRedis(t)
	rcli := newClient(t, r.Addr())
	for _, c := range []*redis.Client{cli, rcli} {
		must(t, c.ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err())
	}
	host, port := hostPort(t, srv.Addr())
	must(t, rcli.SlaveOf(ctx, host, port).Err())
	linkUp(t, rcli)
	return r
}

// serverRecordAt is when the server record's epoch began.
func serverRecordAt(t *testing.T, cli *redis.Client) time.Time {
	t.Helper()
	s, err := cli.HGet(context.Background(), keysFor("any").server, "at").Result()
	must(t, err)
	us, err := strconv.ParseInt(s, 10, 64)
	must(t, err)
	return time.UnixMicro(us)
}

// The epoch rule's server record (rediskit.EpochLua):
// a name the server record does not know is granted at once when the
// record is older than a TTL, but a name unknown there is not always new.

// warmUp has electd use the database behind cli (election "warm") until
// a term is granted there: its server record is then older than ttl.
func warmUp(t *testing.T, cli *redis.Client, ttl time.Duration) {
	t.Helper()
	w := newElectorWith(t, Config{Client: cli, Candidate: elector.Candidate{
		Election: "warm", ID: "w", Timing: elector.Timing{TTL: ttl}}})
	electortest.Resign(t, electortest.MustLead(t, electortest.Campaign(context.Background(), w), 5*ttl, "w").Term)
}

// TestUnknownNameIsNotNew: a leads an election and is cut off (its
// ValidUntil stands); then the election's state is replaced, under the
// same server run, by another database of the server in which electd has
// a server record older than a TTL that does not name the election
// (SWAPDB). b, a new candidate with no step or token of its own, must not
// take the name for new: the record's key names its database
// (electd:server:dbN), so the swapped-in record is not this database's,
// and an epoch begins. Found by an adversarial review of the server
// record (then "electd:server" in every database): b was granted 1-2 ms
// after the swap, a valid 1.96 s more. The review's two other cases are
// documented limits, not tested here: a snapshot from before the
// election's first use restored under the same run (the limit every
// election's own state has: a same-run restore shows only through lost
// writes a candidate saw), and the store repointed to another server (a
// split configuration: a leader that still reaches the old server renews
// there for good, whatever b waits).
func TestUnknownNameIsNotNew(t *testing.T) {
	const election = "unknown"
	const ttl = 2 * time.Second
	tests := []struct {
		name string
		// before readies the state that will replace a's (srv is a's
		// server); lose replaces it and returns b's client.
		before func(t *testing.T, srv *testenv.Redis, cli *redis.Client) (lose func(t *testing.T) *redis.Client)
	}{
		{name: "SWAPDB with a database electd uses", before: func(t *testing.T, srv *testenv.Redis, cli *redis.Client) func(t *testing.T) *redis.Client {
			warmUp(t, newClientDB(t, srv.Addr(), 1), ttl)
			return func(t *testing.T) *redis.Client {
				must(t, cli.Do(context.Background(), "SWAPDB", 0, 1).Err())
				return newClient(t, srv.Addr())
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			srv, cli := startRedis(t)
			lose := tt.before(t, srv, cli)

			g, ra := gatedLeader(ctx, t, srv.Addr(), election, ttl)
			renewed(t, ra.Term)

			g.shut(t) // a is cut off: its ValidUntil stands
			validUntil := ra.Term.ValidUntil()
			bCli := lose(t)
			lost := time.Now()
			if !validUntil.After(lost) {
				t.Fatalf("a's term was not valid when the state was replaced (valid until %s before)", lost.Sub(validUntil))
			}

			b := newElectorWith(t, Config{Client: bCli, Candidate: elector.Candidate{
				Election: election, ID: "b", Timing: elector.Timing{TTL: ttl}}})
			rb := electortest.MustLead(t, electortest.Campaign(ctx, b), 5*ttl, "b")
			if rb.At.Before(validUntil) {
				t.Errorf("b was granted %s after the state was replaced, while a's term was valid for %s more (two valid terms)",
					rb.At.Sub(lost).Round(time.Millisecond), validUntil.Sub(rb.At).Round(time.Millisecond))
			}
			t.Logf("a valid until %s after the replacement; b led %s after it", validUntil.Sub(lost).Round(time.Millisecond),
				rb.At.Sub(lost).Round(time.Millisecond))
			electortest.Resign(t, rb.Term)
		})
	}
}
