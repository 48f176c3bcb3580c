package redis

// Adversarial tests of the epoch rule's server record (rediskit.EpochLua):
// a name the server record does not know is granted at once when the
// record is older than a TTL, but a name unknown there is not always new.

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/testenv"
)

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

			g := newGate()
			aCli := newClient(t, srv.Addr())
			aCli.AddHook(g)
			defer g.open() // before the cleanups close a
			a := newElectorWith(t, Config{Client: aCli, Candidate: elector.Candidate{
				Election: election, ID: "a", Timing: elector.Timing{TTL: ttl}}})
			ra := electortest.MustLead(t, electortest.Campaign(ctx, a), 5*ttl, "a")
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
