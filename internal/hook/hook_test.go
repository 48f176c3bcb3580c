package hook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/electd/electd/clock"
)

const testDeadline = 20 * time.Second

// waitUntil waits, up to testDeadline, until cond holds.
func waitUntil(t *testing.T, cond func() bool, format string, args ...any) {
	t.Helper()
	end := time.Now().Add(testDeadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("after %s: "+format, append([]any{testDeadline}, args...)...)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// logBuf is a log a test can read while the runner writes it.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// start runs a Runner of command until the test ends; stop ends its Run
// and waits for it.
func start(t *testing.T, command string, timeout time.Duration, clk clock.Clock) (r *Runner, log *logBuf, stop func()) {
	t.Helper()
	log = &logBuf{}
	r, err := New(Config{Command: command, Timeout: timeout, Election: "el", ID: "me",
		Env: []string{"PATH=" + os.Getenv("PATH")}, Clock: clk,
		Logger: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(testDeadline):
				t.Errorf("Run did not return within %s", testDeadline)
			}
		})
	}
	t.Cleanup(stop)
	return r, log, stop
}

// lines reads the file path's lines ("" when it does not exist yet).
func lines(path string) []string {
	b, _ := os.ReadFile(path)
	s := strings.TrimSuffix(string(b), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// TestRunnerOrderAndCoalescing: hooks run one at a time in the order of
// the changes; the changes that come while one runs are coalesced into
// the latest, which runs next with the previous role it ran; Notify does
// not wait for a hook; and a change queued before Run's context ends
// (stopped) still runs.
func TestRunnerOrderAndCoalescing(t *testing.T) {
	dir := t.TempDir()
	out, gate := filepath.Join(dir, "out"), filepath.Join(dir, "gate")
	if err := syscall.Mkfifo(gate, 0o600); err != nil {
		t.Fatal(err)
	}
	// The leading hook waits for the test to open the gate.
	cmd := `echo "$ELECTD_ROLE prev=$ELECTD_PREVIOUS_ROLE leader=$ELECTD_LEADER_ID token=$ELECTD_FENCING_TOKEN ` +
		`id=$ELECTD_ID election=$ELECTD_ELECTION" >> ` + out + `; if [ "$ELECTD_ROLE" = leading ]; then read x < ` + gate + `; fi`
	r, log, stop := start(t, cmd, time.Minute, nil)

	r.Notify(Change{Role: Leading, LeaderID: "me", Token: 5})
	waitUntil(t, func() bool { return len(lines(out)) == 1 }, "the first hook did not run")
	began := time.Now()
	for _, c := range []Change{
		{Role: Waiting},
		{Role: Following, LeaderID: "b", Token: 7},
		{Role: Waiting},
		{Role: Following, LeaderID: "c", Token: 9},
		{Role: Following, LeaderID: "c", Token: 9}, // the same again: nothing new
	} {
		r.Notify(c)
	}
	if took := time.Since(began); took > time.Second {
		t.Errorf("Notify took %s while a hook ran; it must not wait", took)
	}
	g, err := os.OpenFile(gate, os.O_WRONLY, 0) // the leading hook reads it
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.WriteString("go\n"); err != nil {
		t.Fatal(err)
	}
	g.Close()
	waitUntil(t, func() bool { return len(lines(out)) == 2 }, "the coalesced hook did not run: %q", lines(out))
	r.Notify(Change{Role: Stopped})
	stop() // the stopped change is queued: it runs before Run returns

	want := []string{
		"leading prev= leader=me token=5 id=me election=el",
		"following prev=leading leader=c token=9 id=me election=el",
		"stopped prev=following leader= token= id=me election=el",
	}
	if got := lines(out); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("hooks ran:\n%s\nwant:\n%s\nlog:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), log)
	}
	if !strings.Contains(log.String(), "coalesced=3") {
		t.Errorf("the log does not say that 3 changes were coalesced:\n%s", log)
	}
	if n := runs(t, r, resultOK); n != 3 {
		t.Errorf("electd_hook_runs_total{result=ok} = %v, want 3", n)
	}
}

// TestRunnerResults: a hook that fails is logged at WARN with its code
// and counted as failed; one that outlives its timeout (on the runner's
// clock) has its whole process group killed and is counted as timeout;
// the next hook runs after it.
func TestRunnerResults(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "bg")
	clk := clock.NewFake(time.Unix(1e9, 0))
	cmd := `case "$ELECTD_ROLE" in
	leading) sleep 1000 & echo $! > ` + pidFile + `.new; mv ` + pidFile + `.new ` + pidFile + `; wait ;;
	following) exit 3 ;;
	esac`
	r, log, _ := start(t, cmd, 30*time.Second, clk)

	r.Notify(Change{Role: Leading, LeaderID: "me", Token: 5})
	var bg int
	waitUntil(t, func() bool {
		b, err := os.ReadFile(pidFile)
		bg, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && clk.Pending() > 0
	}, "the hook did not start its background job, or the runner armed no timeout")
	pgid, err := syscall.Getpgid(bg)
	if err != nil || pgid == syscall.Getpgrp() {
		t.Fatalf("the hook's job %d is in group %d (err %v), want a group of the hook's own", bg, pgid, err)
	}
	clk.Advance(29 * time.Second)
	r.Notify(Change{Role: Following, LeaderID: "b", Token: 7})
	if dead(bg) {
		t.Fatal("the hook was killed before its timeout")
	}
	clk.Advance(time.Second)
	waitUntil(t, func() bool { return runs(t, r, resultTimeout) == 1 },
		"the hook was not counted as timed out:\n%s", log)
	waitUntil(t, func() bool { return dead(bg) }, "the hook's background job %d outlived the timeout", bg)
	if !errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH) && !groupDead(pgid) {
		t.Errorf("the hook's process group %d is not empty after its timeout", pgid)
	}
	waitUntil(t, func() bool { return runs(t, r, resultFailed) == 1 },
		"the failing hook was not counted as failed:\n%s", log)
	for _, want := range []string{
		`level=WARN msg="hook timed out; its process group was killed (SIGKILL)" hook=on-change role=leading`,
		`level=WARN msg="hook failed" hook=on-change role=following previous_role=leading pid=`,
		"code=3",
	} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log does not have %q:\n%s", want, log)
		}
	}
}

// runs reads electd_hook_runs_total{result}.
func runs(t *testing.T, r *Runner, result string) float64 {
	t.Helper()
	var m dto.Metric
	if err := r.runs.WithLabelValues(result).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// dead reports whether pid no longer runs: gone, or a zombie.
func dead(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return strings.HasPrefix(rest, "Z") || strings.HasPrefix(rest, "X")
}

// groupDead reports whether every process of group pgid is dead (zombies
// of a reaper that does not reap, such as a container's init, remain).
func groupDead(pgid int) bool {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if g, err := syscall.Getpgid(pid); err == nil && g == pgid && !dead(pid) {
			return false
		}
	}
	return true
}

// TestNewRefuses: a Runner needs a command and a positive timeout.
func TestNewRefuses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		command string
		timeout time.Duration
	}{
		{name: "empty command", command: "", timeout: time.Second},
		{name: "zero timeout", command: "true", timeout: 0},
		{name: "negative timeout", command: "true", timeout: -time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(Config{Command: tc.command, Timeout: tc.timeout}); err == nil {
				t.Fatal("New accepted it")
			}
		})
	}
}

// TestRunnerHurry: Hurry (a second SIGINT) kills the hook that runs, with
// its process group, at once, long before its timeout, and no later hook
// runs.
func TestRunnerHurry(t *testing.T) {
	dir := t.TempDir()
	out, pidFile := filepath.Join(dir, "out"), filepath.Join(dir, "bg")
	cmd := `echo "$ELECTD_ROLE" >> ` + out + `; if [ "$ELECTD_ROLE" = leading ]; then sleep 1000 & echo $! > ` + pidFile +
		`.new; mv ` + pidFile + `.new ` + pidFile + `; wait; fi`
	r, log, stop := start(t, cmd, time.Hour, nil)
	r.Notify(Change{Role: Leading, LeaderID: "me", Token: 5})
	var bg int
	waitUntil(t, func() bool {
		b, err := os.ReadFile(pidFile)
		bg, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}, "the hook did not start its background job")
	r.Notify(Change{Role: Stopped})
	r.Hurry()
	stop()
	waitUntil(t, func() bool { return dead(bg) }, "the hook's background job %d outlived Hurry", bg)
	if got := strings.Join(lines(out), " "); got != "leading" {
		t.Errorf("hooks told %q after Hurry, want only leading", got)
	}
	if !strings.Contains(log.String(), `msg="hook not run: electd stops at once (a second interrupt)" hook=on-change role=stopped`) {
		t.Errorf("the log does not say the stopped hook was not run:\n%s", log)
	}
}
