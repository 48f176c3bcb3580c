package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// asMainEnv makes the test binary behave as electd itself: tests exec
// os.Args[0] with it set, so the real main path (flags, environment, exit
// codes, output) runs in its own process without a separate build. Its
// ELECTD_ prefix keeps it out of the child's environment like any setting.
const asMainEnv = "ELECTD_TEST_AS_MAIN"

func init() {
	if os.Getenv(asMainEnv) == "1" {
		hideProcess(os.Stderr) // as main does
		os.Exit(exitCode(run(context.Background(), os.Args), os.Stderr))
	}
}

// electdCmd returns a command running electd with args; env is added to
// the test's environment.
func electdCmd(ctx context.Context, t *testing.T, env []string, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("test binary: %v", err)
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Args[0] = "electd"
	cmd.Env = append(append(os.Environ(), asMainEnv+"=1"), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// result is what a finished electd printed and its exit status.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%sstderr:\n%s", r.code, r.stdout, r.stderr)
}

// runElectd runs electd to completion (at most timeout) and returns its
// exit code and output.
func runElectd(t *testing.T, timeout time.Duration, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := electdCmd(ctx, t, env, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.Exited():
		r.code = ee.ExitCode()
	default:
		t.Fatalf("electd %s: %v\n%s", strings.Join(args, " "), err, r)
	}
	return r
}

// lockedBuffer is a bytes.Buffer safe for a writer and a reader at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
