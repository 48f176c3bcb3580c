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

// TestFreshNameGrantedAtOnce: the epoch rule (rediskit.EpochLua) on a
// quorum. On servers electd has known for longer than a TTL, a name never
// used before is granted in its first round; on servers that restarted
// empty, not before one TTL, and the campaign says why.
func TestFreshNameGrantedAtOnce(t *testing.T) {
	tests := []struct {
		name    string
		restart bool
	}{
		{name: "servers known for a TTL"},
		{name: "servers restarted empty", restart: true},
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
			case !tt.restart && took > 100*time.Millisecond:
				t.Errorf("a fresh name was granted after %s, want under 100 ms", took)
			case !tt.restart && len(waits) != 0:
				t.Errorf("a campaign that did not wait logged %v", waits)
			case tt.restart && took < faultTTL-50*time.Millisecond:
				t.Errorf("granted %s after the servers restarted empty, within their first TTL %s", took, faultTTL)
			case tt.restart && (len(waits) != 1 || waits[0].Attrs["why"].String() != rediskit.EpochWhy("restarted")):
				t.Errorf("the campaign logged %v, want one epoch wait because the servers restarted", waits)
			}
			t.Logf("granted after %s", took.Round(10*time.Microsecond))
			electortest.Resign(t, r.Term)
		})
	}
}
