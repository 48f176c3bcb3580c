package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/testenv"
)

func TestLockSuite(t *testing.T) {
	srv := testenv.StartRedis(t)
	electortest.RunLock(t, &harness{srv: srv, cli: newClient(t, srv.Addr())})
}

// TestRunRecordSurvivesVolatileEviction: under a volatile-* policy Redis
// evicts only keys with a TTL. Another tenant of the same Redis fills
// memory with cached keys that have one; the --once-per record of a 20 h
// period must survive, or the job runs again within its period.
func TestRunRecordSurvivesVolatileEviction(t *testing.T) {
	tests := []struct {
		name, policy string
		tenantTTL    time.Duration // the other tenant's keys' TTL
	}{
		{name: "lru", policy: "volatile-lru", tenantTTL: time.Hour},
		{name: "lfu", policy: "volatile-lfu", tenantTTL: time.Hour},
		{name: "random", policy: "volatile-random", tenantTTL: time.Hour},
		{name: "ttl", policy: "volatile-ttl", tenantTTL: 48 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, cli := startRedis(t)
			ctx := context.Background()
			must(t, cli.ConfigSet(ctx, "maxmemory", "8mb").Err())
			must(t, cli.ConfigSet(ctx, "maxmemory-policy", tt.policy).Err())
			e := newElector(t, srv.Addr(), "evict", "a")
			now := time.Now().UTC().Truncate(time.Millisecond)
			want := elector.RunRecord{ID: "a", Token: 7, Started: now.Add(-time.Minute), Finished: now, Expires: now.Add(20 * time.Hour)}
			if err := e.RecordRun(ctx, want, 20*time.Hour); err != nil {
				t.Fatalf("RecordRun: %v", err)
			}
			evicted := fillWithCache(t, cli, keysFor("evict").lastRun, tt.tenantTTL)
			got, err := e.LastRun(ctx)
			if err != nil {
				t.Fatalf("after the other tenant's keys were evicted %d times, LastRun: %v (the job would run again within its period)", evicted, err)
			}
			if got.ID != want.ID || got.Token != want.Token || !got.Finished.Equal(want.Finished) {
				t.Fatalf("LastRun = %+v, want %+v", got, want)
			}
			t.Logf("%s: the record survived %d evictions", tt.policy, evicted)
		})
	}
}

// fillWithCache writes another tenant's cached keys (4 KiB values with a
// TTL of ttl) until Redis has evicted 20000 keys, about ten times what fits
// in 8 MB, or record is gone; it returns the evictions.
func fillWithCache(t *testing.T, cli *redis.Client, record string, ttl time.Duration) int {
	t.Helper()
	ctx := context.Background()
	value := strings.Repeat("x", 4096)
	for batch := 0; ; batch++ {
		_, err := cli.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := range 500 {
				p.Set(ctx, fmt.Sprintf("tenant:%d:%d", batch, i), value, ttl)
			}
			return nil
		})
		must(t, err)
		n := evictedKeys(t, cli)
		if gone, err := cli.Exists(ctx, record).Result(); err != nil || gone == 0 || n >= 20000 {
			must(t, err)
			return n
		}
	}
}

// evictedKeys reads INFO stats' evicted_keys.
func evictedKeys(t *testing.T, cli *redis.Client) int {
	t.Helper()
	info, err := cli.Info(context.Background(), "stats").Result()
	must(t, err)
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "evicted_keys:"); ok {
			n, err := strconv.Atoi(v)
			must(t, err)
			return n
		}
	}
	t.Fatal("INFO stats has no evicted_keys")
	return 0
}

// TestRunRecordFormats: a record is stored without a TTL, its lapse by the
// server's clock in its value; records from an electd before that format
// (with PX) and other tools' values are read as before.
func TestRunRecordFormats(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Millisecond)
	rec := elector.RunRecord{ID: "a", Token: 7, Started: now.Add(-time.Minute), Finished: now, Expires: now.Add(time.Hour)}
	plain, err := elector.EncodeRun(rec, time.Hour)
	must(t, err)
	withLapse := func(at time.Time) string {
		return fmt.Sprintf(`{"server_expires_us":%d,%s`, at.UnixMicro(), plain[1:])
	}
	tests := []struct {
		name    string
		stored  string        // "" : RecordRun(rec, time.Hour)
		ttl     time.Duration // of stored
		want    string        // the record's ID; "": ErrNoRun
		wantKey bool          // the key remains
	}{
		{name: "recorded", want: "a", wantKey: true},
		{name: "old format with a TTL", stored: string(plain), ttl: time.Hour, want: "a", wantKey: true},
		{name: "live by the server's clock", stored: withLapse(now.Add(time.Hour)), want: "a", wantKey: true},
		{name: "lapsed by the server's clock", stored: withLapse(now.Add(-time.Second)), want: "", wantKey: false},
		{name: "another tool's text", stored: "cron-host-3", want: "cron-host-3", wantKey: true},
	}
	srv, cli := startRedis(t)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			election := fmt.Sprintf("formats-%d", i)
			key := keysFor(election).lastRun
			e := newElector(t, srv.Addr(), election, "a")
			if tt.stored == "" {
				must(t, e.RecordRun(ctx, rec, time.Hour))
				checkStoredRecord(t, cli, key, rec)
			} else {
				must(t, cli.Set(ctx, key, tt.stored, tt.ttl).Err())
			}
			got, err := e.LastRun(ctx)
			switch {
			case tt.want == "" && !errors.Is(err, elector.ErrNoRun):
				t.Errorf("LastRun = %+v, %v; want ErrNoRun", got, err)
			case tt.want != "" && (err != nil || got.ID != tt.want):
				t.Errorf("LastRun = %+v, %v; want the record of %q", got, err, tt.want)
			}
			if n := cli.Exists(ctx, key).Val(); (n == 1) != tt.wantKey {
				t.Errorf("the key exists: %v, want %v", n == 1, tt.wantKey)
			}
		})
	}
}

// checkStoredRecord checks that key holds rec without a TTL, its lapse
// (by the server's clock) first in its JSON.
func checkStoredRecord(t *testing.T, cli *redis.Client, key string, rec elector.RunRecord) {
	t.Helper()
	ctx := context.Background()
	if ttl := cli.PTTL(ctx, key).Val(); ttl != -time.Nanosecond && ttl != -1 {
		t.Errorf("the record has a TTL (%s): a volatile-* policy may evict it", ttl)
	}
	v, err := cli.Get(ctx, key).Result()
	must(t, err)
	var stored struct {
		Lapse int64 `json:"server_expires_us"`
		elector.RunRecord
	}
	if err := json.Unmarshal([]byte(v), &stored); err != nil || !strings.HasPrefix(v, `{"server_expires_us":`) {
		t.Fatalf("stored %q: %v", v, err)
	}
	if stored.ID != rec.ID || stored.Token != rec.Token {
		t.Errorf("stored %q, want the record of %q", v, rec.ID)
	}
	if left := time.Until(time.UnixMicro(stored.Lapse)); left < 59*time.Minute || left > time.Hour+time.Minute {
		t.Errorf("the record lapses in %s, want an hour", left)
	}
}

// TestRunRecordEvictionWarning: the first read or write of a run record
// warns, once, when the server's maxmemory-policy may evict it.
func TestRunRecordEvictionWarning(t *testing.T) {
	tests := []struct {
		name, policy string
		warn         bool
	}{
		{name: "noeviction", policy: "noeviction"},
		{name: "volatile", policy: "volatile-lru"},
		{name: "allkeys", policy: "allkeys-lru", warn: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, cli := startRedis(t)
			ctx := context.Background()
			must(t, cli.ConfigSet(ctx, "maxmemory-policy", tt.policy).Err())
			logs, log := electortest.NewLogs()
			e := newElectorWith(t, Config{Client: newClient(t, srv.Addr()), Candidate: elector.Candidate{
				Election: "warn", ID: "a", Timing: testTiming(), Logger: log}})
			now := time.Now()
			for range 2 {
				if _, err := e.LastRun(ctx); !errors.Is(err, elector.ErrNoRun) {
					t.Fatalf("LastRun: %v", err)
				}
			}
			must(t, e.RecordRun(ctx, elector.RunRecord{ID: "a", Finished: now, Expires: now.Add(time.Hour)}, time.Hour))
			warned := logs.Lines(func(l electortest.LogLine) bool {
				return l.Level == slog.LevelWarn && strings.Contains(l.Msg, "run record")
			})
			if want := map[bool]int{true: 1, false: 0}[tt.warn]; len(warned) != want {
				t.Fatalf("%d warnings about the run record, want %d: %+v", len(warned), want, warned)
			}
			if tt.warn && warned[0].Attrs["maxmemory-policy"].String() != tt.policy {
				t.Errorf("the warning names policy %v, want %s", warned[0].Attrs["maxmemory-policy"], tt.policy)
			}
		})
	}
}
