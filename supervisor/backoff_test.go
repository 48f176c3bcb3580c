package supervisor

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// crashChild writes a child that counts its runs in dir/n, leaves a worker
// (sleep) behind in its group, records its pid in dir/workers, and ends
// with last; a run n for which dir/hold.n exists first writes its pid to
// dir/main.pid and waits (SIGUSR1: exit 0).
func crashChild(t *testing.T, dir, last string) []string {
	t.Helper()
	path := filepath.Join(dir, "crash.sh")
	writeScript(t, path, "#!/bin/sh\n"+
		"n=$(( $(cat "+dir+"/n 2>/dev/null || echo 0) + 1 )); echo $n > "+dir+"/n\n"+
		"sleep 1000 &\necho $! >> "+dir+"/workers\n"+
		"if [ -e "+dir+"/hold.$n ]; then trap 'exit 0' USR1; echo $$ > "+dir+"/main.pid; wait; fi\n"+
		last+"\n")
	return []string{path}
}

// crashHarness runs crashChild under pgroup containment and --on-exit
// resign, with a cool-down of 500ms capped at 4s, on the fake clock.
func crashHarness(t *testing.T, last string) (*harness, string, *syncBuf) {
	t.Helper()
	dir := t.TempDir()
	logs := newSyncBuf()
	h := newHarness(t, func(c *Config) {
		c.Command, c.Containment, c.OnExit = crashChild(t, dir, last), ContainPgroup, OnExitResign
		c.CoolDown, c.CoolDownMax = 500*time.Millisecond, 4*time.Second
		c.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(logs, tWriter{t}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	t.Cleanup(func() {
		for _, p := range readPids(filepath.Join(dir, "workers")) {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	})
	return h, dir, logs
}

// failAndCoolDown grants a term to h's child, which fails at once, and
// checks that the cool-down that follows is want, on the fake clock, for
// the failures-th failure in a row; it returns once the cool-down is over.
func failAndCoolDown(t *testing.T, h *harness, failures int, want time.Duration) {
	t.Helper()
	h.grant(uint64(failures))
	waitFor(t, "cool-down after failure "+strconv.Itoa(failures), func() bool {
		b := h.sup.Backoff()
		return b.Failures == failures && !b.Until.IsZero()
	})
	if b := h.sup.Backoff(); b.CoolDown != want || b.Until.Sub(h.clk.Now()) != want {
		t.Fatalf("after failure %d: cool-down %s until now+%s, want %s", failures, b.CoolDown, b.Until.Sub(h.clk.Now()), want)
	}
	h.clk.Advance(want - time.Millisecond)
	if h.sup.Backoff().Until.IsZero() {
		t.Fatalf("after failure %d: the cool-down of %s ended before its time", failures, want)
	}
	h.clk.Advance(time.Millisecond)
	waitFor(t, "the end of the cool-down", func() bool { return h.sup.Backoff().Until.IsZero() })
}

// TestCoolDownGrows: a child that fails at once under --on-exit resign is
// logged at WARN with its code or signal, and each failure in a row
// doubles the cool-down before the next campaign, up to its cap; the
// streak reaches the metrics. The worker the child left is gone each time.
func TestCoolDownGrows(t *testing.T) {
	tests := []struct {
		name, last, logged string
	}{
		{name: "exit 3", last: "exit 3", logged: "supervisor.code=3 supervisor.outcome=failure"},
		{name: "killed by SIGSEGV", last: "kill -SEGV $$", logged: "supervisor.outcome=signaled"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, dir, logs := crashHarness(t, tc.last)
			want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second}
			for i, d := range want {
				failAndCoolDown(t, h, i+1, d)
				if alive := aliveOf(readPids(filepath.Join(dir, "workers"))); len(alive) > 0 {
					t.Fatalf("after failure %d the workers %v are alive", i+1, alive)
				}
			}
			out := logs.String()
			warns := strings.Count(out, `level=WARN msg="child exited"`)
			if warns != len(want) || !strings.Contains(out, tc.logged) ||
				!strings.Contains(out, "supervisor.consecutive_failures=5") || !strings.Contains(out, "supervisor.cool_down=4s") {
				t.Fatalf("want %d WARN lines of the child's exit with %q, consecutive_failures=5 and cool_down=4s, got %d:\n%s",
					len(want), tc.logged, warns, out)
			}
			if tc.last != "exit 3" && !strings.Contains(out, "supervisor.signal=SIGSEGV") {
				t.Fatalf("the signal is not named:\n%s", out)
			}
			for _, ev := range []string{"backoff:0:500ms", "backoff:1:500ms", "backoff:2:1s", "backoff:4:4s", "backoff:5:4s"} {
				if !h.ev.has(ev) {
					t.Errorf("no event %s in %v", ev, h.ev.events)
				}
			}
		})
	}
}

// TestCoolDownStreakEnds: after three quick failures, the fourth run's end
// decides the streak: a run that lasted --cool-down-max starts a new one
// (a failure then counts as the first), an exit with code 0 ends it, a
// short run killed by a signal that was not a stop adds to it.
func TestCoolDownStreakEnds(t *testing.T) {
	tests := []struct {
		name     string
		ran      time.Duration // on the fake clock
		sig      syscall.Signal
		failures int
		coolDown time.Duration
		warn     bool
	}{
		{name: "a run that lasted, then killed", ran: 4 * time.Second, sig: syscall.SIGKILL, failures: 1, coolDown: 500 * time.Millisecond, warn: true},
		{name: "a short run, killed", sig: syscall.SIGKILL, failures: 4, coolDown: 4 * time.Second, warn: true},
		{name: "a short run, exit 0", sig: syscall.SIGUSR1, failures: 0, coolDown: 500 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, dir, logs := crashHarness(t, "exit 1")
			if err := os.WriteFile(filepath.Join(dir, "hold.4"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			for i, d := range []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second} {
				failAndCoolDown(t, h, i+1, d)
			}
			h.grant(4)
			pid := waitPid(t, filepath.Join(dir, "main.pid"))
			h.clk.Advance(tc.ran)
			before := strings.Count(logs.String(), `level=WARN msg="child exited"`)
			if err := syscall.Kill(pid, tc.sig); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the cool-down after the fourth run", func() bool { return !h.sup.Backoff().Until.IsZero() })
			if b := h.sup.Backoff(); b.Failures != tc.failures || b.CoolDown != tc.coolDown {
				t.Fatalf("after the fourth run: %d failures, cool-down %s; want %d, %s", b.Failures, b.CoolDown, tc.failures, tc.coolDown)
			}
			after := strings.Count(logs.String(), `level=WARN msg="child exited"`)
			if (after > before) != tc.warn {
				t.Fatalf("the fourth exit logged at WARN: %v, want %v:\n%s", after > before, tc.warn, logs.String())
			}
		})
	}
}

// waitPid waits for a pid written to path.
func waitPid(t *testing.T, path string) int {
	t.Helper()
	var pid int
	waitFor(t, "a pid in "+path, func() bool {
		b, err := os.ReadFile(path)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return pid
}

// TestHurry: once Run is ending and its child, whose whole tree ignores
// SIGTERM, is (or is about to be) stopped, Hurry SIGKILLs the tree at once
// rather than after the stop timeout (which here, on the fake clock, never
// comes); the term is given up only once every worker is gone.
func TestHurry(t *testing.T) {
	tests := []struct {
		name       string
		duringStop bool // Hurry once the stop signal went out, else at once
	}{
		{name: "during the stop", duringStop: true},
		{name: "before the stop"},
	}
	forModes(t, modes, func(t *testing.T, mode Containment) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				cmd, pidFile := treeChild(t, true, false, false)
				logs := newSyncBuf()
				th := &treeHarness{pidFile: pidFile}
				th.harness = newHarness(t, func(c *Config) {
					c.Command, c.Containment = cmd, mode
					c.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(logs, tWriter{t}), &slog.HandlerOptions{Level: slog.LevelDebug}))
				})
				th.grant(t, 30)
				pids := treePids(t, pidFile)
				th.cancel()
				if tc.duringStop {
					logs.waitFor(t, "msg=stopping")
				}
				th.sup.Hurry()
				select {
				case err := <-th.done:
					th.done <- err // for the harness's cleanup
				case <-time.After(testDeadline):
					t.Fatalf("Run did not return after Hurry:\n%s", logs.String())
				}
				checkGone(t, mode, pidFile, "when the term was given up", th.awaitResign(t), pids)
				if !strings.Contains(logs.String(), "signal=SIGKILL") {
					t.Fatalf("no SIGKILL logged:\n%s", logs.String())
				}
			})
		}
	})
}
