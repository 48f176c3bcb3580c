package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
)

// TestRestoredStateStartsAnEpoch: Redis comes back with an older state of
// its own, under the same run_id and master_replid (a VM snapshot
// reverted, a process restored with CRIU; here the keys are written back
// by hand). The restored leases lapsed long ago by the server's clock, so
// the epoch rule by itself would grant the next term at once while the
// leader's ValidUntil still runs. A step shows the loss when it carries a
// token above the stored one (the state predates the current term) or the
// server time of a step of its own later than any the state recorded (it
// lost renewals): a new epoch begins, and no term is granted for one TTL.
func TestRestoredStateStartsAnEpoch(t *testing.T) {
	tests := []struct {
		name string
		// olderTerm: the snapshot is of an earlier term (c's), not of
		// the leader's with older renewals.
		olderTerm bool
	}{
		{name: "an older term", olderTerm: true},
		{name: "the current term without its renewals"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { testRestoredState(t, tt.olderTerm) })
	}
}

func testRestoredState(t *testing.T, olderTerm bool) {
	srv, cli := startRedis(t)
	const election = "restored"
	const ttl = 2 * time.Second
	ctx := context.Background()
	in := func(id string) *Elector {
		return newElectorWith(t, Config{Client: newClient(t, srv.Addr()), Candidate: elector.Candidate{
			Election: election, ID: id, Timing: elector.Timing{TTL: ttl}}})
	}
	var snap snapshot
	if olderTerm {
		rc := electortest.MustLead(t, electortest.Campaign(ctx, in("c")), 5*ttl, "c")
		snap = dumpState(t, cli, election)
		electortest.Resign(t, rc.Term)
	}
	a, b := in("a"), in("b")
	ra := electortest.MustLead(t, electortest.Campaign(ctx, a), 5*ttl, "a")
	cb := electortest.Campaign(ctx, b)
	waitQueued(t, cli, election, 2)
	electortest.Eventually(t, ttl, "b to see a's token", func() bool { return b.core.Seen() >= ra.Term.Leader.Token })
	if !olderTerm {
		snap = dumpState(t, cli, election)
	}
	// By the time a snapshot is restored the clock has moved on: the
	// restored leases have lapsed (and a and b renewed since).
	electortest.Eventually(t, 2*ttl, "the snapshot's leases to lapse", func() bool { return serverNow(t, cli).After(snap.lastDeadline) })

	// a's deadline as it stood at the restore (at least): its term may end
	// sooner, when it learns that its entry is gone, but its child may run
	// until then and is only stopped at that point.
	validUntil := ra.Term.ValidUntil()
	restoreState(t, cli, snap)
	restored := time.Now()
	leadsAfterRestore(t, cb, 5*ttl, "b", ra, validUntil, restored)
}

// leadsAfterRestore waits up to within for who's campaign ch to lead, and
// checks that who was granted its term only once a's term (ra, valid
// until validUntil when the state was restored at restored) was over, and
// with a greater token; then who resigns.
func leadsAfterRestore(t *testing.T, ch <-chan electortest.Result, within time.Duration, who string, ra electortest.Result, validUntil, restored time.Time) {
	t.Helper()
	r := electortest.MustLead(t, ch, within, who)
	if r.At.Before(validUntil) {
		t.Errorf("%s was granted a term %s after the restore, while a's term was valid for %s more",
			who, r.At.Sub(restored).Round(time.Millisecond), validUntil.Sub(r.At).Round(time.Millisecond))
	}
	if r.Term.Leader.Token <= ra.Term.Leader.Token {
		t.Errorf("%s's token %d is not above a's %d", who, r.Term.Leader.Token, ra.Term.Leader.Token)
	}
	t.Logf("restored at 0: a valid until %s, %s led at %s (token %d → %d)", validUntil.Sub(restored).Round(time.Millisecond),
		who, r.At.Sub(restored).Round(time.Millisecond), ra.Term.Leader.Token, r.Term.Leader.Token)
	electortest.Resign(t, r.Term)
}

// snapshot is an election's keys as DUMP gave them ("" for a missing key),
// and the latest lease deadline among them.
type snapshot struct {
	dumps        map[string]string
	lastDeadline time.Time
}

func dumpState(t *testing.T, cli *redis.Client, election string) snapshot {
	t.Helper()
	ctx := context.Background()
	s := snapshot{dumps: map[string]string{}}
	for _, k := range keysFor(election).all() {
		d, err := cli.Dump(ctx, k).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatalf("dump %s: %v", k, err)
		}
		s.dumps[k] = d
	}
	last, err := cli.ZRevRangeWithScores(ctx, keysFor(election).expiry, 0, 0).Result()
	if err != nil || len(last) == 0 {
		t.Fatalf("read the leases: %v (%d)", err, len(last))
	}
	s.lastDeadline = time.UnixMicro(int64(last[0].Score))
	return s
}

// restoreState writes s back in one transaction, as a restored snapshot
// would have it.
func restoreState(t *testing.T, cli *redis.Client, s snapshot) {
	t.Helper()
	ctx := context.Background()
	_, err := cli.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for k, d := range s.dumps {
			if d == "" {
				p.Del(ctx, k)
				continue
			}
			p.RestoreReplace(ctx, k, 0, d)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
}

// serverNow is the Redis server's clock.
func serverNow(t *testing.T, cli *redis.Client) time.Time {
	t.Helper()
	now, err := cli.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return now
}

// TestRestoredStateShownByATokenAlone: the restore only a token shows. The
// snapshot is of an earlier term (c's); a leads now. d, a fresh Elector,
// has made no step against this state, so it carries no step time
// (stepped is 0) and the step rule cannot see the loss; but it watched
// the election and saw a's token, which is above the restored one. d's
// join is the first step after the restore: a's renewals are held back
// meanwhile (as when d joins between two of them), so no step of a's
// reveals the loss first. The token alone must start a new epoch, or d is
// granted at once while a's ValidUntil still runs.
func TestRestoredStateShownByATokenAlone(t *testing.T) {
	srv, cli := startRedis(t)
	const election = "restored-token"
	const ttl = 2 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	in := func(id string, c *redis.Client) *Elector {
		return newElectorWith(t, Config{Client: c, Candidate: elector.Candidate{
			Election: election, ID: id, Timing: elector.Timing{TTL: ttl}}})
	}
	rc := electortest.MustLead(t, electortest.Campaign(ctx, in("c", newClient(t, srv.Addr()))), 5*ttl, "c")
	snap := dumpState(t, cli, election)
	electortest.Resign(t, rc.Term)

	g, ra := gatedLeader(ctx, t, srv.Addr(), election, ttl)
	electortest.Eventually(t, 2*ttl, "the snapshot's leases to lapse", func() bool { return serverNow(t, cli).After(snap.lastDeadline) })

	// d learns a's token the way a watcher does (the view's read), with no
	// step of its own.
	d := in("d", newClient(t, srv.Addr()))
	leaders, within := d.Observe(ctx), time.After(5*ttl)
	for seen := false; !seen; {
		select {
		case l := <-leaders:
			seen = l.ID == "a" && l.Token == ra.Term.Leader.Token
		case <-within:
			t.Fatal("d did not observe a's term")
		}
	}
	if d.core.Seen() < ra.Term.Leader.Token || d.stepped.Load() != 0 {
		t.Fatalf("d: seen %d, stepped %d; want seen ≥ a's token %d and no step", d.core.Seen(), d.stepped.Load(), ra.Term.Leader.Token)
	}

	g.shut(t) // no step of a's is in flight from here until g.open
	validUntil := ra.Term.ValidUntil()
	restoreState(t, cli, snap)
	restored := time.Now()
	if !validUntil.After(restored) {
		t.Fatalf("a's term was not valid at the restore (valid until %s before it)", restored.Sub(validUntil))
	}
	cd := electortest.Campaign(ctx, d)
	electortest.Eventually(t, ttl, "d's first step to be answered", func() bool { return d.stepped.Load() != 0 })
	g.open()

	leadsAfterRestore(t, cd, 5*ttl, "d", ra, validUntil, restored)
}
