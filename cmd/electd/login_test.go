package main

import (
	"context"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// loginStores are etcd stores with a user name that do not answer: etcd's
// client logs in before it returns, and electd retries that login.
func loginStores(t *testing.T) []struct{ name, addr string } {
	return []struct{ name, addr string }{
		{name: "accepts and never answers", addr: blackHole(t)},
		{name: "closed port", addr: closedPort(t)},
	}
}

// TestSignalWhileLoggingIn: SIGTERM or SIGINT ends `run`, `lock` and
// `leader` within a second while an etcd store with a user name does not
// answer the login: run exits 0, lock and leader 128+signal.
func TestSignalWhileLoggingIn(t *testing.T) {
	for _, st := range loginStores(t) {
		store := "etcd://app@" + st.addr
		for _, tc := range []struct {
			name string
			args []string
			code int // for SIGTERM; SIGINT: 128+2 where this is 128+15
		}{
			{name: "run", args: []string{"run", "--store", store, "--election", "e", "--listen", "127.0.0.1:0", "--", "true"}, code: 0},
			{name: "lock", args: []string{"lock", "--store", store, "job", "--", "true"}, code: exitSignal + 15},
			{name: "leader", args: []string{"leader", "--store", store, "--election", "e", "--timeout", "1h"}, code: exitSignal + 15},
		} {
			for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
				t.Run(st.name+"/"+tc.name+"/"+signalNameOf(sig), func(t *testing.T) {
					code := tc.code
					if code != 0 {
						code = exitSignal + int(sig)
					}
					ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
					defer cancel()
					args := append(tc.args[:1:1], append([]string{"--log-level", "debug"}, tc.args[1:]...)...)
					cmd := electdCmd(ctx, t, []string{"ELECTD_STORE_PASSWORD=pw-" + tc.name}, args...)
					var errb lockedBuffer
					cmd.Stderr = &errb
					if err := cmd.Start(); err != nil {
						t.Fatal(err)
					}
					waitLog(t, &errb, "opening the store") // past flag parsing, in the login
					if err := cmd.Process.Signal(sig); err != nil {
						t.Fatal(err)
					}
					sent := time.Now()
					waited := make(chan error, 1)
					go func() { waited <- cmd.Wait() }()
					select {
					case err := <-waited:
						wantExit(t, err, code, &errb)
						t.Logf("exited %v after %s", time.Since(sent).Round(time.Millisecond), signalNameOf(sig))
					case <-time.After(slack(time.Second)):
						_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
						<-waited
						t.Fatalf("electd %s still ran %v after %s:\n%s", tc.name, slack(time.Second), signalNameOf(sig), errb.String())
					}
					if strings.Contains(errb.String(), "pw-"+tc.name) {
						t.Fatalf("the password appears in the log:\n%s", errb.String())
					}
				})
			}
		}
	}
}

// TestLeaderTimeoutWhileLoggingIn: `electd leader --timeout` bounds the
// whole question, the login included: exit 69 (the store cannot be
// reached) naming --timeout.
func TestLeaderTimeoutWhileLoggingIn(t *testing.T) {
	for _, st := range loginStores(t) {
		t.Run(st.name, func(t *testing.T) {
			start := time.Now()
			r := runElectd(t, 30*time.Second, []string{"ELECTD_STORE_PASSWORD=pw"},
				"leader", "--store", "etcd://app@"+st.addr, "--election", "e", "--timeout", "1500ms")
			took := time.Since(start)
			if r.code != exitNoStore || !strings.Contains(r.stderr, "--timeout 1.5s") {
				t.Fatalf("want exit %d naming --timeout 1.5s:\n%s", exitNoStore, r)
			}
			if took > 1500*time.Millisecond+slack(time.Second) {
				t.Fatalf("leader --timeout 1.5s took %v:\n%s", took, r)
			}
			t.Logf("%s (after %v)", strings.TrimSpace(r.stderr), took.Round(time.Millisecond))
		})
	}
}

// slack is d, or 5·d under the race detector, which slows electd's start
// and exit several times (a loaded machine does too: these bounds say
// "promptly", not "within a deadline that matters").
func slack(d time.Duration) time.Duration {
	if raceEnabled {
		return 5 * d
	}
	return d
}

// closedPort is a loopback address where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
