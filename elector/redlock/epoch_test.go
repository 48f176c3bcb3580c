package redlock

import (
	"context"
	"log/slog"
	"testing"
	"time"

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
