package lockrun

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/internal/testenv"
	"github.com/electd/electd/supervisor"
	"github.com/electd/electd/test/proc"
)

// newInit is a namespace init, child of this process, not in seen.
func newInit(seen map[int]bool) int {
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, w := range strings.Fields(string(b)) {
			p, _ := strconv.Atoi(w)
			if seen[p] {
				continue
			}
			cmd, _ := os.ReadFile("/proc/" + w + "/cmdline")
			if strings.HasPrefix(string(cmd), "electd-init\x00") {
				return p
			}
		}
	}
	return 0
}

// TestWaitNotSpentPreparing: `electd lock --wait 2s` on a busy lock, under
// pidns, while the command's namespace init is slow to be ready (held
// stopped before it reported ready, as by a loaded host): the lock must
// still be given up within --wait (+ MaxOverrun). It waited for the init's
// 10 s prepare timeout before it even began to wait for the lock.
func TestWaitNotSpentPreparing(t *testing.T) {
	if _, _, err := supervisor.ResolveContainment(supervisor.ContainPidns); err != nil {
		t.Skipf("SKIP: no pidns: %v", err)
	}
	const wait = 2 * time.Second
	timing := elector.Timing{TTL: 2 * time.Second}.WithDefaults()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, cand := openJobStore(ctx, t, "redis://"+testenv.StartRedis(t).Addr(), timing)
	_, holder := cand("holder")
	if _, err := holder.Campaign(ctx); err != nil {
		t.Fatal(err)
	}
	for attempt := 0; ; attempt++ {
		if attempt == 10 {
			t.Skip("SKIP: the init was never caught before it was ready")
		}
		c, el := cand("waiter" + strconv.Itoa(attempt))
		sup, err := supervisor.New(supervisor.Config{Elector: el, Election: "job", ID: c.ID,
			Command: []string{"sleep", "1000"}, OnExit: supervisor.OnExitExit, Containment: supervisor.ContainPidns,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int]bool{}
		for p := newInit(nil); p != 0; p = newInit(seen) {
			seen[p] = true
		}
		start := time.Now()
		l := &Lock{Config: Config{Candidate: c, Wait: wait, Deadline: start.Add(wait)},
			Log: slog.New(slog.DiscardHandler), Store: st, El: el, Sup: sup}
		done := make(chan error, 1)
		go func() { done <- l.Run(ctx) }()
		var pid int
		for pid == 0 && time.Since(start) < 10*time.Second {
			pid = newInit(seen)
		}
		if pid == 0 {
			t.Fatal("no namespace init appeared")
		}
		_ = syscall.Kill(pid, syscall.SIGSTOP)
		// Through a pidfd taken now: by cleanup the pid may be another's.
		if p, err := os.FindProcess(pid); err == nil {
			t.Cleanup(func() { _ = p.Signal(syscall.SIGKILL); _ = p.Signal(syscall.SIGCONT); _ = p.Release() })
		}
		if proc.Writes(pid) != 0 {
			t.Logf("attempt %d: init %d was caught once ready; again", attempt, pid)
			_ = syscall.Kill(pid, syscall.SIGCONT)
			<-done
			continue
		}
		limit := wait + MaxOverrun + 500*time.Millisecond
		select {
		case err := <-done:
			var be *BusyError
			if !errors.As(err, &be) {
				t.Fatalf("Run = %v, want a *BusyError", err)
			}
			if took := time.Since(start); took > limit {
				t.Fatalf("--wait %v took %v (more than %v)", wait, took.Round(time.Millisecond), limit)
			}
			// Run releases what it prepared: the init is reaped.
			if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the prepared init %d is still there after Run returned", pid)
			}
		case <-time.After(limit - time.Since(start)):
			t.Fatalf("--wait %v: Run had not returned after %v: it waits for the init %d it prepares", wait, limit, pid)
		}
		return
	}
}
