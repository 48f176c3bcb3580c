package supervisor

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/elector"
)

func TestParseContainment(t *testing.T) {
	tests := []struct {
		name, in string
		want     Containment
		err      bool
	}{
		{name: "empty is auto", in: "", want: ContainAuto},
		{name: "auto", in: "auto", want: ContainAuto},
		{name: "pidns", in: "pidns", want: ContainPidns},
		{name: "pgroup", in: "pgroup", want: ContainPgroup},
		{name: "cgroup parses", in: "cgroup", want: ContainCgroup},
		{name: "unknown", in: "jail", err: true},
		{name: "none cannot be asked for", in: "none", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseContainment(tt.in)
			var ce *elector.ConfigError
			switch {
			case tt.err && (!errors.As(err, &ce) || ce.Field != "containment"):
				t.Fatalf("ParseContainment(%q) = %v, want a ConfigError on containment", tt.in, err)
			case !tt.err && (err != nil || got != tt.want):
				t.Fatalf("ParseContainment(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestResolveContainment(t *testing.T) {
	_, _, pidnsErr := ResolveContainment(ContainPidns)
	tests := []struct {
		name string
		in   Containment
		want Containment
		err  bool
	}{
		{name: "pgroup is always there", in: ContainPgroup, want: ContainPgroup},
		{name: "cgroup is not built", in: ContainCgroup, err: true},
		{name: "auto picks pidns when it works", in: ContainAuto, want: map[bool]Containment{true: ContainPidns, false: ContainPgroup}[pidnsErr == nil]},
		{name: "pidns as the probe says", in: ContainPidns, want: ContainPidns, err: pidnsErr != nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, why, err := ResolveContainment(tt.in)
			var ce *elector.ConfigError
			switch {
			case tt.err && (!errors.As(err, &ce) || ce.Field != "containment" || !strings.Contains(err.Error(), "pgroup")):
				t.Fatalf("ResolveContainment(%q) = %v, want a ConfigError on containment that names what works", tt.in, err)
			case !tt.err && (err != nil || got != tt.want || why == ""):
				t.Fatalf("ResolveContainment(%q) = %q (%q), %v; want %q with a reason", tt.in, got, why, err, tt.want)
			}
		})
	}
}

// TestPidnsPassesThrough: under the namespace init the child's exit code,
// the signal that killed it, its output and environment are exactly what
// they are without it, and forwarded signals reach it.
func TestPidnsPassesThrough(t *testing.T) {
	needMode(t, ContainPidns)
	tests := []struct {
		name     string
		path     string // instead of sh -c script
		script   string
		signal   syscall.Signal // sent with Child.Signal once it runs, if not 0
		code     int
		sig      syscall.Signal
		stdout   string
		exitCode int
	}{
		{name: "exit 0", script: "exit 0", code: 0},
		{name: "exit 7", script: "exit 7", code: 7, exitCode: 7},
		{name: "exit 255", script: "exit 255", code: 255, exitCode: 255},
		{name: "killed by SIGKILL", script: "kill -9 $$", code: -1, sig: syscall.SIGKILL, exitCode: 137},
		{name: "killed by SIGSEGV", script: "kill -SEGV $$", code: -1, sig: syscall.SIGSEGV, exitCode: 139},
		{name: "output untouched", script: "printf 'a\\000b\\n'; printf err >&2", stdout: "a\x00b\n"},
		{name: "environment exact", path: "/usr/bin/env", stdout: "ONLY=this\n"},
		{name: "not PID 1: SIGTERM has its default action", script: "[ $$ != 1 ] && echo not-init; exec sleep 1000",
			signal: syscall.SIGTERM, code: -1, sig: syscall.SIGTERM, stdout: "not-init\n", exitCode: 143},
		{name: "forwarded signal reaches it", script: "trap 'exit 42' USR1; echo ready; while :; do sleep 0.01; done",
			signal: syscall.SIGUSR1, code: 42, stdout: "ready\n", exitCode: 42},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut := newSyncBuf(), newSyncBuf()
			spec := ChildSpec{Path: "/bin/sh", Args: []string{"-c", tt.script}, Env: []string{"ONLY=this"},
				Stdout: out, Stderr: errOut, Containment: ContainPidns}
			if tt.path != "" {
				spec.Path, spec.Args = tt.path, nil
			}
			c := runChild(t, spec)
			if tt.signal != 0 {
				out.waitFor(t, "\n")
				if err := c.Signal(tt.signal); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case <-c.Done():
			case <-time.After(testDeadline):
				t.Fatal("child did not exit")
			}
			if _, err := c.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
			st := c.Exit()
			if st.Code != tt.code || st.Signal != tt.sig || st.ExitCode() != tt.exitCode {
				t.Errorf("exit = code %d signal %v (%d), want code %d signal %v (%d)",
					st.Code, st.Signal, st.ExitCode(), tt.code, tt.sig, tt.exitCode)
			}
			if tt.stdout != "" && out.String() != tt.stdout {
				t.Errorf("stdout = %q, want %q", out.String(), tt.stdout)
			}
			if tt.name == "output untouched" && errOut.String() != "err" {
				t.Errorf("stderr = %q, want %q", errOut.String(), "err")
			}
		})
	}
}

// TestPidnsStopReachesWholeTree: the stop signal reaches a setsid'd
// process too (through the init's kill(-1)), so a tree that stops on
// SIGTERM stops gracefully, not by SIGKILL.
func TestPidnsStopReachesWholeTree(t *testing.T) {
	needMode(t, ContainPidns)
	c, out := runSh(t,
		"setsid sh -c 'trap \"echo daemon-term; exit 0\" TERM; echo daemon; while :; do sleep 0.01; done' & "+
			"trap 'wait; exit 0' TERM; while :; do sleep 0.01; done",
		ChildSpec{StopTimeout: 5 * time.Second, Containment: ContainPidns})
	out.waitFor(t, "daemon")
	st, err := c.Stop(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Killed || !strings.Contains(out.String(), "daemon-term") {
		t.Fatalf("stop = %+v, output %q: the setsid'd daemon did not get SIGTERM", st, out.String())
	}
}
