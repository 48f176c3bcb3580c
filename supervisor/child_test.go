package supervisor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestExecWithoutShell(t *testing.T) {
	out := newSyncBuf()
	c := runChild(t, ChildSpec{Path: "echo", Args: []string{"a  b", "$HOME", "*", "`x`"}, Stdout: out})
	st := waitDone(t, c)
	stopOK(t, c, context.Background()) // delivers the rest of the output
	if got, want := out.String(), "a  b $HOME * `x`\n"; got != want {
		t.Errorf("output %q, want %q (arguments must reach the program unexpanded)", got, want)
	}
	if st.Code != 0 || st.Signal != 0 || st.Outcome() != "success" {
		t.Errorf("exit %+v, want code 0, outcome success", st)
	}
}

func TestShell(t *testing.T) {
	out := newSyncBuf()
	c := runChild(t, ChildSpec{
		Shell:  true,
		Path:   "echo",
		Args:   []string{"$GREETING", "*", "|", "tr", "h", "H;", "exit", "4"},
		Env:    []string{"GREETING=hello"},
		Dir:    t.TempDir(), // empty: the glob stays as is
		Stdout: out,
	})
	st := waitDone(t, c)
	stopOK(t, c, context.Background())
	if got, want := out.String(), "Hello *\n"; got != want {
		t.Errorf("output %q, want %q", got, want)
	}
	if st.Code != 4 || st.ExitCode() != 4 || st.Outcome() != "failure" {
		t.Errorf("exit %+v, want code 4, outcome failure", st)
	}
}

func TestEnvExact(t *testing.T) {
	env := []string{"A=1", "B=two words", "EMPTY=", "ELECTD_FENCING_TOKEN=42"}
	out := newSyncBuf()
	c := runChild(t, ChildSpec{Path: "env", Env: env, Stdout: out})
	waitDone(t, c)
	stopOK(t, c, context.Background())
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if !slices.Equal(got, env) {
		t.Errorf("child environment %q, want exactly %q", got, env)
	}

	t.Setenv("ELECTD_SECRET", "must-not-leak")
	out = newSyncBuf()
	c = runChild(t, ChildSpec{Path: "env", Stdout: out})
	waitDone(t, c)
	stopOK(t, c, context.Background())
	if got := out.String(); got != "" {
		t.Errorf("nil Env: child environment %q, want empty", got)
	}
}

func TestDirAndFileOutput(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := runChild(t, ChildSpec{Path: "/bin/sh", Args: []string{"-c", "pwd; echo err >&2"}, Dir: dir, Stdout: f, Stderr: f})
	waitDone(t, c)
	stopOK(t, c, context.Background())
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), dir+"\nerr\n"; got != want {
		t.Errorf("output %q, want %q", got, want)
	}
}

func TestSharedWriterForStdoutAndStderr(t *testing.T) {
	out := newSyncBuf()
	c := runChild(t, ChildSpec{Path: "/bin/sh", Args: []string{"-c", "echo out; echo err >&2; echo out2"}, Stdout: out, Stderr: out})
	waitDone(t, c)
	stopOK(t, c, context.Background())
	if got, want := out.String(), "out\nerr\nout2\n"; got != want {
		t.Errorf("output %q, want %q (one pipe keeps the order)", got, want)
	}
}

func TestExitCodesExact(t *testing.T) {
	for _, code := range []int{0, 1, 3, 127, 255} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			c := runChild(t, ChildSpec{Path: "/bin/sh", Args: []string{"-c", "exit " + strconv.Itoa(code)}})
			st := waitDone(t, c)
			if st.Code != code || st.ExitCode() != code || st.Signal != 0 || st.Killed {
				t.Errorf("exit %+v, want code %d", st, code)
			}
			if !st.Exited.After(st.Started) && !st.Exited.Equal(st.Started) {
				t.Errorf("Exited %v before Started %v", st.Exited, st.Started)
			}
		})
	}
}

func TestKilledBySignal(t *testing.T) {
	c := runChild(t, ChildSpec{Path: "sleep", Args: []string{"1000"}})
	if err := c.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	st := waitDone(t, c)
	if st.Signal != syscall.SIGKILL || st.ExitCode() != 137 || st.Code != -1 || st.Killed || st.Outcome() != "signaled" {
		t.Errorf("exit %+v (ExitCode %d, outcome %s), want SIGKILL, 137, signaled", st, st.ExitCode(), st.Outcome())
	}
	if err := c.Signal(syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("Signal after exit: %v, want os.ErrProcessDone", err)
	}
}

func TestDoneClosesOnNaturalExit(t *testing.T) {
	c := runChild(t, ChildSpec{Path: "true"})
	if c.Pid() <= 0 {
		t.Fatalf("Pid %d", c.Pid())
	}
	st := waitDone(t, c)
	if st.Outcome() != "success" || st.Started.IsZero() || st.Exited.Before(st.Started) {
		t.Errorf("exit %+v", st)
	}
	// Done stays closed and Exit stays the same.
	<-c.Done()
	if c.Exit() != st {
		t.Errorf("Exit changed: %+v then %+v", st, c.Exit())
	}
}

func TestStartErrors(t *testing.T) {
	for name, spec := range map[string]ChildSpec{
		"missing":     {Path: "/nonexistent/electd-no-such-program"},
		"not in PATH": {Path: "electd-no-such-program"},
		"empty":       {},
		"empty shell": {Shell: true, Args: []string{" "}},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := StartChild(spec, testLogger(t))
			if err == nil {
				c.Stop(context.Background())
				t.Fatal("StartChild succeeded")
			}
			if !strings.HasPrefix(err.Error(), "start child: ") {
				t.Errorf("error %q does not name the operation", err)
			}
		})
	}
}

func TestStopGraceful(t *testing.T) {
	c := runChild(t, ChildSpec{Path: "sleep", Args: []string{"1000"}, StopTimeout: time.Minute})
	st := stopOK(t, c, context.Background())
	if st.Signal != syscall.SIGTERM || st.ExitCode() != 143 || st.Killed || st.Outcome() != "signaled" {
		t.Errorf("exit %+v, want SIGTERM (143), not killed", st)
	}
	if !groupEmpty(c.Pid()) {
		t.Error("process group not empty after Stop")
	}
}

func TestStopCustomSignal(t *testing.T) {
	c, out := runSh(t, `trap 'echo bye; exit 0' INT; echo ready; while :; do sleep 1000 & wait; done`,
		ChildSpec{StopSignal: syscall.SIGINT, StopTimeout: time.Minute})
	out.waitFor(t, "ready")
	st := stopOK(t, c, context.Background())
	if st.Code != 0 || st.Signal != 0 || st.Outcome() != "success" {
		t.Errorf("exit %+v, want a clean exit from the INT trap", st)
	}
	if !strings.Contains(out.String(), "bye") {
		t.Errorf("output %q: the trap did not run", out.String())
	}
}

// ignoreTerm prints "ready" once SIGTERM is ignored (the ignored disposition
// survives exec, so the sleep ignores it too).
const ignoreTerm = "trap '' TERM; echo ready; exec sleep 1000"

func TestStopEscalatesAfterTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	c, out := runSh(t, ignoreTerm, ChildSpec{StopTimeout: timeout})
	out.waitFor(t, "ready")
	begin := time.Now()
	st := stopOK(t, c, context.Background())
	if !st.Killed || st.Signal != syscall.SIGKILL || st.ExitCode() != 137 || st.Outcome() != "killed" {
		t.Errorf("exit %+v, want Killed by SIGKILL (137)", st)
	}
	if lived := st.Exited.Sub(begin); lived < timeout {
		t.Errorf("child died %s after the stop signal, before the %s timeout", lived, timeout)
	}
}

func TestStopTimeoutZeroKillsAtOnce(t *testing.T) {
	c, out := runSh(t, ignoreTerm, ChildSpec{})
	out.waitFor(t, "ready")
	st := stopOK(t, c, context.Background())
	if !st.Killed || st.ExitCode() != 137 {
		t.Errorf("exit %+v, want Killed (137)", st)
	}
}

func TestStopContextBoundsGraceOnly(t *testing.T) {
	c, out := runSh(t, ignoreTerm, ChildSpec{StopTimeout: time.Hour})
	out.waitFor(t, "ready")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	st := stopOK(t, c, ctx)
	if !st.Killed || st.ExitCode() != 137 {
		t.Errorf("exit %+v, want Killed (137)", st)
	}
	select {
	case <-c.Done():
	default:
		t.Error("Stop returned before the child was reaped")
	}
	if !groupEmpty(c.Pid()) {
		t.Error("process group not empty after Stop")
	}
}

func TestStopConcurrentAndIdempotent(t *testing.T) {
	c, out := runSh(t, ignoreTerm, ChildSpec{StopTimeout: time.Hour})
	out.waitFor(t, "ready")

	type result struct {
		st  ExitStatus
		err error
	}
	results := make(chan result, 9)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := c.Stop(context.Background())
			results <- result{st, err}
		}()
	}
	// One caller whose ctx ends cuts the hour-long grace short for all.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	st, err := c.Stop(ctx)
	results <- result{st, err}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(testDeadline):
		t.Fatal("concurrent Stop calls did not return")
	}
	close(results)
	for r := range results {
		if r.err != nil || r.st != st {
			t.Errorf("Stop returned %+v, %v; another call %+v", r.st, r.err, st)
		}
	}
	if !st.Killed || st.ExitCode() != 137 {
		t.Errorf("exit %+v, want Killed (137)", st)
	}
	again, err := c.Stop(context.Background())
	if err != nil || again != st {
		t.Errorf("Stop again: %+v, %v; want %+v", again, err, st)
	}
}

// grandchild reads the pid that the child printed on its first line.
func grandchild(t *testing.T, out *syncBuf) int {
	t.Helper()
	line, _, _ := strings.Cut(out.waitFor(t, "\n"), "\n")
	pid, err := strconv.Atoi(line)
	if err != nil {
		t.Fatalf("child printed %q, want a pid", line)
	}
	killAtCleanup(t, pid, syscall.SIGKILL)
	return pid
}

func TestStopKillsGrandchildren(t *testing.T) {
	c, out := runSh(t, "sleep 1000 & echo $!; wait", ChildSpec{StopTimeout: time.Minute})
	g := grandchild(t, out)
	if st, err := readStat(g); err != nil || st.pgrp != c.Pid() || procDead(g) {
		t.Fatalf("grandchild %d: %+v, %v; want alive in group %d", g, st, err, c.Pid())
	}
	stopOK(t, c, context.Background())
	if !procGone(g) {
		t.Errorf("grandchild %d still exists after Stop", g)
	}
	if !groupEmpty(c.Pid()) {
		t.Error("process group not empty after Stop")
	}
}

func TestStopAfterNaturalExitKillsLeftovers(t *testing.T) {
	c, out := runSh(t, "sleep 1000 & echo $!; exit 5", ChildSpec{})
	g := grandchild(t, out)
	if st := waitDone(t, c); st.Code != 5 {
		t.Errorf("exit %+v, want code 5", st)
	}
	if procDead(g) {
		t.Fatalf("grandchild %d died with its parent; the test proves nothing", g)
	}
	if err := c.Signal(syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("Signal after Done: %v, want os.ErrProcessDone", err)
	}
	st := stopOK(t, c, context.Background())
	if st.Code != 5 || st.Killed {
		t.Errorf("Stop after exit changed the status: %+v", st)
	}
	if !procGone(g) || !groupEmpty(c.Pid()) {
		t.Errorf("grandchild %d survived Stop", g)
	}
}

func TestSignalReachesWholeGroup(t *testing.T) {
	// The background sleep starts before the trap, so SIGUSR1 kills it; the
	// leader ignores SIGUSR1 (the ignored disposition survives exec).
	c, out := runSh(t, "sleep 1000 & echo $!; trap '' USR1; echo ready; exec sleep 1001", ChildSpec{})
	g := grandchild(t, out)
	out.waitFor(t, "ready")
	if err := c.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, testDeadline, func() bool { return procDead(g) }, "grandchild %d did not get the group signal", g)
	select {
	case <-c.Done():
		t.Fatalf("the leader should ignore SIGUSR1: %+v", c.Exit())
	default:
	}
}

// TestNoGoroutineLeak: once Stop has returned, the child's goroutines (the
// waiter on its locked thread, the output copiers) are gone.
func TestNoGoroutineLeak(t *testing.T) {
	run := func() {
		c, out := runSh(t, "sleep 1000 & echo $!; wait", ChildSpec{Stderr: newSyncBuf()})
		grandchild(t, out)
		stopOK(t, c, context.Background())
	}
	run() // warm up whatever the runtime starts once (signal handling)
	base := runtime.NumGoroutine()
	for range 5 {
		run()
	}
	waitUntil(t, testDeadline, func() bool { return runtime.NumGoroutine() <= base },
		"%d goroutines, %d before", runtime.NumGoroutine(), base)
}
