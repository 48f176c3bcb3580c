package store

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/testenv"
)

// TestEvictionWarning: Open warns once the store answers when Redis may
// evict the election's keys (allkeys-*), names the setting and what to set
// instead, and says nothing for noeviction or volatile-*.
func TestEvictionWarning(t *testing.T) {
	r := testenv.StartRedis(t)
	cli := r.Client(t)
	ctx := context.Background()
	const warning = "redis may evict the election's keys"
	for _, tc := range []struct {
		policy string
		warns  bool
	}{{"allkeys-lru", true}, {"allkeys-random", true}, {"noeviction", false}, {"volatile-lru", false}} {
		t.Run(tc.policy, func(t *testing.T) {
			if err := cli.ConfigSet(ctx, "maxmemory-policy", tc.policy).Err(); err != nil {
				t.Fatal(err)
			}
			logs, log := electortest.NewLogs()
			st, err := Open(ctx, Options{URL: "redis://" + r.Addr()}, log)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			lines := logs.Lines(func(ln electortest.LogLine) bool {
				return ln.Level == slog.LevelWarn && strings.HasPrefix(ln.Msg, warning)
			})
			if got := len(lines) > 0; got != tc.warns {
				t.Fatalf("warned = %v, want %v (lines %v)", got, tc.warns, logs.Lines(nil))
			}
			if tc.warns {
				if p := lines[0].Attrs["maxmemory-policy"]; p.String() != tc.policy || !strings.Contains(lines[0].Msg, "set maxmemory-policy noeviction") {
					t.Errorf("warning %q %v: want the policy and what to set", lines[0].Msg, lines[0].Attrs)
				}
			}
		})
	}
}
