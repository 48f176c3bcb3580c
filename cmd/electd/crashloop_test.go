package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/internal/testenv"
)

// TestCrashLoop: a child that exits 1 at once under --on-exit resign,
// leaving a worker behind, is logged at WARN with its code each time; the
// gap between its starts grows (--cool-down 100ms, doubling up to
// --cool-down-max 800ms); /healthz and /metrics show the streak and the
// cool-down. (The streak's end after a run that lasted is in the
// supervisor's tests, on a fake clock.)
func TestCrashLoop(t *testing.T) {
	store := "etcd://" + testenv.StartEtcd(t).Endpoint()
	tests := []struct {
		name, exit, logged string
	}{
		{name: "exit 1", exit: "exit 1", logged: "supervisor.code=1 supervisor.outcome=failure"},
		{name: "killed by SIGABRT", exit: "kill -ABRT $$", logged: "supervisor.signal=SIGABRT"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			starts, workers := filepath.Join(dir, "starts"), filepath.Join(dir, "workers")
			listen := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := electdCmd(ctx, t, nil, "run", "--store", store, "--election", "crash-"+strconv.Itoa(i),
				"--ttl", "3s", "--listen", listen, "--on-exit", "resign", "--cool-down", "100ms", "--cool-down-max", "800ms",
				"--containment", "pgroup", "--shell", "--",
				"date +%s.%N >> "+starts+"; sleep 1000 & echo $! >> "+workers+"; "+tc.exit)
			var errb lockedBuffer
			cmd.Stderr = &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				for _, p := range readInts(workers) {
					_ = syscall.Kill(p, syscall.SIGKILL)
				}
			})
			const n = 7
			var at []float64
			deadline := time.Now().Add(30 * time.Second)
			for at = readFloats(starts); len(at) < n; at = readFloats(starts) {
				if time.Now().After(deadline) {
					t.Fatalf("%d starts within 30s, want %d:\n%s", len(at), n, errb.String())
				}
				time.Sleep(20 * time.Millisecond) // polling a condition with a deadline
			}
			// During the cool-downs after the 6th failure and on, the cap.
			var health struct {
				Failures int     `json:"child_consecutive_failures"`
				CoolDown float64 `json:"cool_down_seconds"`
			}
			_, body := httpGet(t, "http://"+listen+"/healthz")
			if err := json.Unmarshal([]byte(body), &health); err != nil || health.Failures < n-1 || health.CoolDown != 0.8 {
				t.Errorf("/healthz = %s (%v), want child_consecutive_failures ≥ %d and cool_down_seconds 0.8", body, err, n-1)
			}
			_, metrics := httpGet(t, "http://"+listen+"/metrics")
			if m := regexp.MustCompile(`(?m)^electd_child_consecutive_failures\{election="[^"]+"\} (\d+)$`).FindStringSubmatch(metrics); m == nil {
				t.Errorf("no electd_child_consecutive_failures in /metrics:\n%s", metrics)
			} else if v, _ := strconv.Atoi(m[1]); v < n-1 {
				t.Errorf("electd_child_consecutive_failures = %d, want ≥ %d", v, n-1)
			}
			if !regexp.MustCompile(`(?m)^electd_cool_down_seconds\{election="[^"]+"\} 0.8$`).MatchString(metrics) {
				t.Errorf("electd_cool_down_seconds is not 0.8:\n%s", metrics)
			}
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			wantExit(t, cmd.Wait(), 0, &errb)

			var gaps []time.Duration
			for i := 1; i < len(at); i++ {
				gaps = append(gaps, time.Duration((at[i]-at[i-1])*float64(time.Second)).Round(time.Millisecond))
			}
			t.Logf("gaps between starts: %v (cool-downs 100ms, 200ms, 400ms, 800ms, 800ms …)", gaps)
			// Loosely: each cool-down is a floor; the fourth gap is at
			// least 800ms and far longer than the first.
			for i, want := range []time.Duration{100, 200, 400, 800, 800} {
				if gaps[i] < want*time.Millisecond {
					t.Errorf("gap %d is %s, shorter than its cool-down %dms", i+1, gaps[i], want)
				}
			}
			if gaps[3] < 2*gaps[0] {
				t.Errorf("the gaps do not grow: %v", gaps)
			}
			out := errb.String()
			if w := strings.Count(out, `level=WARN msg="child exited"`); w < n || !strings.Contains(out, tc.logged) {
				t.Errorf("want ≥ %d WARN lines of the child's exit with %q, got %d:\n%s", n, tc.logged, w, out)
			}
			for _, p := range readInts(workers) {
				if syscall.Kill(p, 0) == nil {
					if st, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/stat"); err == nil && !strings.Contains(string(st), ") Z ") {
						t.Errorf("the worker %d outlived its run", p)
					}
				}
			}
		})
	}
}

func readFloats(path string) []float64 {
	b, _ := os.ReadFile(path)
	var out []float64
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if !strings.HasSuffix(l, "\n") {
			break // being written
		}
		if f, err := strconv.ParseFloat(strings.TrimSpace(l), 64); err == nil {
			out = append(out, f)
		}
	}
	return out
}

func readInts(path string) []int {
	var out []int
	for _, f := range readFloats(path) {
		out = append(out, int(f))
	}
	return out
}
