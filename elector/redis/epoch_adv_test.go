package redis

// Adversarial tests of the epoch rule's server record (rediskit.EpochLua):
// a name the server record does not know is granted at once when the
// record is older than a TTL, but a name unknown there is not always new.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/testenv"
)

// advServerKey is the server record's key outside Redis Cluster (spelt
// out, so that these tests also build against 317220f's keys).
const advServerKey = "electd:server"

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
// same server run, by a state in which electd has a server record older
// than a TTL that does not name the election: another database of the
// server (SWAPDB), a snapshot of the database taken before the election's
// first use (the state restored, as a reverted VM or DEBUG RELOAD of an
// older RDB restores it: same run_id, same master_replid), or another
// server electd uses (the store's address repointed). b, a new candidate
// with no step or token of its own, finds a born record missing and a
// server record that does not know the name, takes the name for new, and
// is granted at once while a's term is valid. At 317220f a missing born
// record always began an epoch, and b waited one TTL.
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
		{name: "a snapshot from before the election's first use restored", before: func(t *testing.T, srv *testenv.Redis, cli *redis.Client) func(t *testing.T) *redis.Client {
			warmUp(t, cli, ttl)
			ctx := context.Background()
			dump, err := cli.Dump(ctx, advServerKey).Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				t.Fatalf("dump the server record: %v", err)
			}
			return func(t *testing.T) *redis.Client {
				// The snapshot: no key of the election, the server
				// record as it was.
				_, err := cli.TxPipelined(ctx, func(p redis.Pipeliner) error {
					p.Del(ctx, keysFor(election).all()...)
					if dump == "" {
						p.Del(ctx, advServerKey)
					} else {
						p.RestoreReplace(ctx, advServerKey, 0, dump)
					}
					return nil
				})
				must(t, err)
				return newClient(t, srv.Addr())
			}
		}},
		{name: "the store repointed to another server electd uses", before: func(t *testing.T, srv *testenv.Redis, cli *redis.Client) func(t *testing.T) *redis.Client {
			other := testenv.StartRedis(t)
			warmUp(t, newClient(t, other.Addr()), ttl)
			return func(t *testing.T) *redis.Client { return newClient(t, other.Addr()) }
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
