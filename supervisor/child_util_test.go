package supervisor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The test process is a child subreaper, as electd is in production: the
// orphans of the children it starts come back to it, and Stop and
// ReapOrphans must reap them.
//
// Run as nobody (TestUsernsAsNonRoot), the test process is not dumpable,
// as electd makes itself (cmd/electd's hideProcess): the /proc files of
// what it forks belong to root until they exec.
func TestMain(m *testing.M) {
	if pid := os.Getenv(envHoldExit); pid != "" {
		os.Exit(holdExitMain(pid))
	}
	if os.Getenv(envAsNobody) != "" {
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
			fmt.Fprintln(os.Stderr, "supervisor tests: PR_SET_DUMPABLE:", err)
			os.Exit(1)
		}
	}
	if err := BecomeSubreaper(); err != nil {
		fmt.Fprintln(os.Stderr, "supervisor tests:", err)
		os.Exit(1)
	}
	code := m.Run()
	if helperDir != "" {
		os.RemoveAll(helperDir)
	}
	if titledBin != "" {
		os.RemoveAll(filepath.Dir(titledBin))
	}
	os.Exit(code)
}

const testDeadline = 10 * time.Second

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// runChild starts spec and makes sure the child and its group are gone when
// the test ends.
func runChild(t *testing.T, spec ChildSpec) *Child {
	t.Helper()
	c, err := StartChild(spec, testLogger(t))
	if err != nil {
		t.Fatalf("StartChild: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
		defer cancel()
		if _, err := c.Stop(ctx); err != nil {
			t.Errorf("cleanup Stop: %v", err)
		}
	})
	return c
}

// runSh is runChild of /bin/sh -c script with its stdout in the returned
// buffer; spec sets the other fields.
func runSh(t *testing.T, script string, spec ChildSpec) (*Child, *syncBuf) {
	t.Helper()
	out := newSyncBuf()
	spec.Path, spec.Args, spec.Stdout = "/bin/sh", []string{"-c", script}, out
	return runChild(t, spec), out
}

func waitDone(t *testing.T, c *Child) ExitStatus {
	t.Helper()
	select {
	case <-c.Done():
		return c.Exit()
	case <-time.After(testDeadline):
		t.Fatalf("child %d did not exit within %s", c.Pid(), testDeadline)
		return ExitStatus{}
	}
}

func stopOK(t *testing.T, c *Child, ctx context.Context) ExitStatus {
	t.Helper()
	st, err := c.Stop(ctx)
	if err != nil {
		t.Fatalf("Stop: %v", err)
	}
	return st
}

// syncBuf is a writer that tests can wait on.
type syncBuf struct {
	mu     sync.Mutex
	b      bytes.Buffer
	change chan struct{}
}

func newSyncBuf() *syncBuf { return &syncBuf{change: make(chan struct{}, 1)} }

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case b.change <- struct{}{}:
	default:
	}
	return b.b.Write(p)
}

func (b *syncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// waitFor waits until the output contains s and returns the output.
func (b *syncBuf) waitFor(t *testing.T, s string) string {
	t.Helper()
	timer := time.NewTimer(testDeadline)
	defer timer.Stop()
	for {
		if out := b.String(); strings.Contains(out, s) {
			return out
		}
		select {
		case <-b.change:
		case <-timer.C:
			t.Fatalf("output %q does not contain %q after %s", b.String(), s, testDeadline)
		}
	}
}

// waitUntil polls cond until it holds or the deadline d passes.
func waitUntil(t *testing.T, d time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("after %s: "+format, append([]any{d}, args...)...)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// procGone reports whether no process pid exists, not even as a zombie.
func procGone(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return errors.Is(err, os.ErrNotExist)
}

// procDead reports whether pid no longer runs: gone, or a zombie.
func procDead(pid int) bool {
	st, err := readStat(pid)
	return err != nil || st.state == 'Z' || st.state == 'X'
}

func groupEmpty(pgid int) bool {
	return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
}

var (
	helperOnce sync.Once
	helperDir  string
	helperBin  string
	helperErr  error
)

// testchildBin builds ./internal/testchild once per test binary.
func testchildBin(t *testing.T) string {
	t.Helper()
	helperOnce.Do(func() {
		helperDir, helperErr = os.MkdirTemp("", "electd-testchild-")
		if helperErr != nil {
			return
		}
		helperBin = filepath.Join(helperDir, "testchild")
		out, err := exec.Command("go", "build", "-o", helperBin, "./internal/testchild").CombinedOutput()
		if err != nil {
			helperErr = fmt.Errorf("go build testchild: %v\n%s", err, out)
		}
	})
	if helperErr != nil {
		t.Fatal(helperErr)
	}
	return helperBin
}
