package main

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/internal/deathsig"
	"github.com/electd/electd/internal/testenv"
)

// TestSignalsDuringShutdown sends electd a second signal while it stops a
// child whose tree ignores SIGTERM (the shell and its grandchild), under
// pgroup containment, where only electd can kill the grandchild: electd
// must not die of it, the whole tree must be gone when it exits, and the
// exit code is the one of the first signal (run: 0, lock: 128+N). A second
// SIGTERM is ignored (the tree gets SIGKILL after --stop-timeout); a
// second SIGINT, the second Ctrl-C, SIGKILLs the tree at once: electd
// exits well before --stop-timeout.
func TestSignalsDuringShutdown(t *testing.T) {
	store := "etcd://" + testenv.StartEtcd(t).Endpoint()
	tests := []struct {
		name   string
		args   []string
		first  syscall.Signal // default SIGTERM
		second syscall.Signal
		code   int
		killed bool // the tree ends by SIGKILL after the stop timeout
		hurry  bool // the tree ends by SIGKILL at once (second SIGINT)
	}{
		{name: "run, SIGTERM twice", args: []string{"run", "--election", "sig-run", "--listen", "127.0.0.1:0"},
			second: syscall.SIGTERM, code: 0, killed: true},
		{name: "run, SIGINT then SIGTERM", args: []string{"run", "--election", "sig-run-int-term", "--listen", "127.0.0.1:0"},
			first: syscall.SIGINT, second: syscall.SIGTERM, code: 0, killed: true},
		{name: "run, SIGTERM then SIGINT", args: []string{"run", "--election", "sig-run-int", "--listen", "127.0.0.1:0"},
			second: syscall.SIGINT, code: 0, hurry: true},
		{name: "run, SIGINT twice", args: []string{"run", "--election", "sig-run-int-int", "--listen", "127.0.0.1:0"},
			first: syscall.SIGINT, second: syscall.SIGINT, code: 0, hurry: true},
		{name: "lock, SIGINT twice", args: []string{"lock", "sig-lock-int"}, first: syscall.SIGINT, second: syscall.SIGINT,
			code: exitSignal + 2, hurry: true},
		{name: "lock, SIGTERM twice", args: []string{"lock", "sig-lock"}, second: syscall.SIGTERM, code: exitSignal + 15, killed: true},
		// SIGHUP is forwarded to the child's group: the shell dies of it,
		// and its grandchild is killed with what is left of the tree.
		{name: "lock, SIGTERM then SIGHUP", args: []string{"lock", "sig-lock-hup"}, second: syscall.SIGHUP, code: exitSignal + 15},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "grandchild.pid")
			child := `trap "" TERM; sleep 1001 & echo $! > ` + pidFile + `; wait`
			stopTimeout := 2 * time.Second
			if tc.hurry {
				stopTimeout = 5 * time.Second
			}
			first := tc.first
			if first == 0 {
				first = syscall.SIGTERM
			}
			args := append([]string{tc.args[0], "--store", store, "--ttl", "10s", "--stop-timeout", stopTimeout.String(),
				"--containment", "pgroup", "--shell"}, tc.args[1:]...)
			args = append(args, "--", child)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := electdCmd(ctx, t, nil, args...)
			var errb lockedBuffer
			cmd.Stderr = &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			grandchild := waitPidFile(t, pidFile, &errb)
			born := startTicks(grandchild) // to tell it from a process that reuses its pid
			t.Cleanup(func() {
				if startTicks(grandchild) == born {
					_ = syscall.Kill(grandchild, syscall.SIGKILL)
				}
			})

			if err := cmd.Process.Signal(first); err != nil {
				t.Fatal(err)
			}
			waitLog(t, &errb, "msg=stopping") // the child's tree got the stop signal
			if err := cmd.Process.Signal(tc.second); err != nil {
				t.Fatal(err)
			}
			sent := time.Now()
			wantExit(t, cmd.Wait(), tc.code, &errb)
			took := time.Since(sent)
			t.Logf("electd exited %s after the second signal (--stop-timeout %s)", took.Round(time.Millisecond), stopTimeout)
			if tc.hurry && took > stopTimeout/2 {
				t.Fatalf("electd exited %s after the second SIGINT, not at once (--stop-timeout %s):\n%s", took, stopTimeout, errb.String())
			}
			if deathsig.Alive(grandchild) && startTicks(grandchild) == born {
				t.Fatalf("the grandchild %d (ignores SIGTERM) outlived electd:\n%s", grandchild, errb.String())
			}
			if tc.killed && !strings.Contains(errb.String(), "signal=SIGKILL") {
				t.Fatalf("the tree was not SIGKILLed after the stop timeout:\n%s", errb.String())
			}
			// A second SIGTERM is ignored, and said to be; a second SIGINT
			// kills the tree now, and says so; a SIGHUP is forwarded to the
			// child.
			ignored := `msg="signal received while stopping; already stopping, ignored`
			if want := tc.second == syscall.SIGTERM; strings.Contains(errb.String(), ignored) != want {
				t.Fatalf("logged that the second signal was ignored: %v, want %v:\n%s", !want, want, errb.String())
			}
			hurried := `msg="second interrupt while stopping; killing the child's tree now (SIGKILL)"`
			if strings.Contains(errb.String(), hurried) != tc.hurry {
				t.Fatalf("logged that the second signal killed the tree: %v, want %v:\n%s", !tc.hurry, tc.hurry, errb.String())
			}
			if tc.hurry && !strings.Contains(errb.String(), "signal=SIGKILL") {
				t.Fatalf("the tree was not SIGKILLed:\n%s", errb.String())
			}
		})
	}
}

// wantExit fails t unless electd, whose Wait returned err, exited with code.
func wantExit(t *testing.T, err error, code int, log *lockedBuffer) {
	t.Helper()
	var ee *exec.ExitError
	switch {
	case err == nil && code == 0:
	case errors.As(err, &ee) && ee.Exited() && ee.ExitCode() == code:
	default:
		t.Fatalf("electd ended with %v, want exit %d:\n%s", err, code, log.String())
	}
}

// waitPidFile waits for the child to write its grandchild's pid.
func waitPidFile(t *testing.T, path string, log *lockedBuffer) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil && strings.HasSuffix(string(b), "\n") {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatalf("pid file %q: %v", b, err)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child did not start within 30s:\n%s", log.String())
		}
		time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
	}
}

// waitLog waits for electd's log to contain s.
func waitLog(t *testing.T, log *lockedBuffer, s string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(log.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("electd did not log %q within 30s:\n%s", s, log.String())
		}
		time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
	}
}

// TestSignalWhileOpening: a SIGTERM while `lock` or `run` still opens a
// store that does not answer is caught, not fatal: lock exits 128+15 saying
// nothing was held, run exits 0.
func TestSignalWhileOpening(t *testing.T) {
	ln := blackHole(t)
	for _, tc := range []struct {
		name string
		args []string
		code int
		says string
	}{
		{name: "lock", args: []string{"lock", "--store", "etcd://" + ln, "--log-level", "debug", "job", "--", "true"},
			code: exitSignal + 15, says: "stopped by SIGTERM"},
		{name: "run", args: []string{"run", "--store", "etcd://" + ln, "--log-level", "debug", "--election", "e", "--listen", "127.0.0.1:0"},
			code: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := electdCmd(ctx, t, nil, tc.args...)
			var errb lockedBuffer
			cmd.Stderr = &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waitLog(t, &errb, "opening the store") // past flag parsing, signals caught
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			wantExit(t, cmd.Wait(), tc.code, &errb)
			if !strings.Contains(errb.String(), tc.says) {
				t.Fatalf("electd did not say %q:\n%s", tc.says, errb.String())
			}
		})
	}
}

// blackHole listens on loopback and never answers: a store that hangs.
func blackHole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				_ = c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	return ln.Addr().String()
}

// startTicks is the start time of pid in clock ticks since boot (field 22
// of /proc/PID/stat), or 0 if it cannot be read.
func startTicks(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 20 {
		return 0
	}
	v, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0
	}
	return v
}
