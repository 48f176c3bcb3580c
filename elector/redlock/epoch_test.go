package redlock

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/elector/internal/rediskit"
)

// TestFreshNameWaitsOnAQuorum: the epoch rule (rediskit.EpochLua) on a
// quorum. A server of a quorum that has no record of a name cannot tell a
// name never used from one whose beginning it missed (its candidates could
// not reach it), so even on servers electd has known for longer than a TTL
// a fresh name waits one TTL (TestMissedServerAndRestoredServer shows why),
// and the campaign says why: the name is unknown there, or, on servers that
// restarted empty, the restart.
func TestFreshNameWaitsOnAQuorum(t *testing.T) {
	tests := []struct {
		name    string
		restart bool
		why     string
	}{
		{name: "servers known for a TTL", why: "unknown"},
		{name: "servers restarted empty", restart: true, why: "restarted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, 3)
			ctx := context.Background()
			// electd's first use of the servers: one TTL.
			warm := h.candidate(t, "warm", "w")
			electortest.Resign(t, electortest.MustLead(t, electortest.Campaign(ctx, warm), 5*faultTTL, "w").Term)
			if tt.restart {
				h.Restart(t)
			}
			logs, log := electortest.NewLogs()
			e := h.New(t, electortest.Candidate{StoreAddr: h.Addr(), Candidate: elector.Candidate{
				Election: "fresh", ID: "a", Timing: elector.Timing{TTL: faultTTL}, Logger: log}})
			start := time.Now()
			r := electortest.MustLead(t, electortest.Campaign(ctx, e), 5*faultTTL, "a")
			took := r.At.Sub(start)
			waits := logs.Lines(electortest.Line(slog.LevelInfo, rediskit.EpochWaitMsg, "", ""))
			switch {
			case took < faultTTL-50*time.Millisecond:
				t.Errorf("a fresh name was granted %s after its campaign began, within one TTL %s", took, faultTTL)
			case len(waits) != 1 || waits[0].Attrs["why"].String() != rediskit.EpochWhy(tt.why):
				t.Errorf("the campaign logged %v, want one epoch wait: %s", waits, rediskit.EpochWhy(tt.why))
			}
			t.Logf("granted after %s", took.Round(10*time.Microsecond))
			electortest.Resign(t, r.Term)
		})
	}
}

// The epoch rule's server record (rediskit.EpochLua) under Redlock: a
// server that missed a beginning or went back does not take a name for new.

// TestMissedServerAndRestoredServer: a server that missed an election's
// beginning (cut off from its candidates, with no state lost) must not
// take the name for new and grant it at once: then one other server whose
// state goes back under the same run (a snapshot restored: same run_id
// and master_replid) makes a quorum for a second term. So on Redlock a
// name unknown to a server begins its epoch there (EpochLua's known
// false). Found by an adversarial review of the server record, which had
// such a server grant at once (b led 4-6 ms after the restore, a valid
// 1.96 s more). Every candidate before b reaches servers 0 and 1
// only; a leads there and is cut off; server 0's state is restored to a
// snapshot. b, a new candidate that reaches all three, must not lead
// while a's term is valid.
//
// "an earlier term": the snapshot holds the election (c's term, lapsed by
// the restore). Server 0 grants b at once at 317220f too (Redlock's epoch
// rule sees no lost step or token); there server 2 kept b waiting one
// TTL, as it must still. "before the election's first use": the
// snapshot holds only electd's server record.
func TestMissedServerAndRestoredServer(t *testing.T) {
	const serverKey = "electd:server:db0"
	for _, tt := range []struct {
		name    string
		earlier bool // the snapshot holds c's earlier term, else no key of the election
	}{
		{name: "an earlier term", earlier: true},
		{name: "before the election's first use"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, 3)
			el := faultElection(t)
			ctx := context.Background()
			warm := h.candidate(t, "warm", "w")
			electortest.Resign(t, electortest.MustLead(t, electortest.Campaign(ctx, warm), 5*faultTTL, "w").Term)
			// proxied0and1 is a candidate that reaches servers 0 and 1
			// only: server 2 never hears of the election from it.
			proxied0and1 := func(id string) (*electortest.Result, func()) {
				e, ps := h.proxied(t, el, id)
				ps[2].Cut()
				r := electortest.MustLead(t, electortest.Campaign(ctx, e), 10*faultTTL, id)
				return &r, func() { ps[0].Cut(); ps[1].Cut() }
			}

			snapKeys := []string{serverKey}
			var snapDeadline time.Time
			var rc *electortest.Result
			if tt.earlier {
				rc, _ = proxied0and1("c")
				snapKeys = append(snapKeys, keysFor(el).all()...)
				vu := rc.Term.ValidUntil()
				electortest.Eventually(t, faultTTL, "a renewal of c's term", func() bool { return rc.Term.ValidUntil().After(vu) })
			}
			snap := map[string]string{}
			for _, k := range snapKeys {
				d, err := h.clis[0].Dump(ctx, k).Result()
				if err != nil && !errors.Is(err, redis.Nil) {
					t.Fatalf("dump %s: %v", k, err)
				}
				snap[k] = d
			}
			if rc != nil {
				// The snapshot's leases lapse by the server's deadline,
				// ValidUntil plus the drift margin: one TTL after it.
				snapDeadline = rc.Term.ValidUntil().Add(faultTTL)
				electortest.Resign(t, rc.Term)
			}

			ra, cut := proxied0and1("a")
			electortest.Eventually(t, 3*faultTTL, "the snapshot's leases to lapse", func() bool { return time.Now().After(snapDeadline) })
			vu := ra.Term.ValidUntil()
			electortest.Eventually(t, faultTTL, "a renewal of a's term", func() bool { return ra.Term.ValidUntil().After(vu) })
			cut()
			validUntil := ra.Term.ValidUntil()

			_, err := h.clis[0].TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Del(ctx, keysFor(el).all()...)
				for k, d := range snap {
					if d == "" {
						p.Del(ctx, k)
					} else {
						p.RestoreReplace(ctx, k, 0, d)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatalf("restore server 0: %v", err)
			}
			lost := time.Now()
			if !validUntil.After(lost) {
				t.Fatalf("a's term was not valid at the restore (valid until %s before)", lost.Sub(validUntil))
			}

			b := h.candidate(t, el, "b")
			rb := electortest.MustLead(t, electortest.Campaign(ctx, b), 5*faultTTL, "b")
			if v := ra.Term.ValidUntil(); v.After(validUntil) {
				validUntil = v // a reply already past the proxy at the cut
			}
			if rb.At.Before(validUntil) {
				t.Errorf("b was granted %s after server 0 was restored, while a's term was valid for %s more (two valid terms; tokens %d, %d)",
					rb.At.Sub(lost).Round(time.Millisecond), validUntil.Sub(rb.At).Round(time.Millisecond), ra.Term.Token, rb.Term.Token)
			}
			t.Logf("a valid until %s after the restore; b led %s after it", validUntil.Sub(lost).Round(time.Millisecond),
				rb.At.Sub(lost).Round(time.Millisecond))
			electortest.Resign(t, rb.Term)
		})
	}
}
