package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
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
		{name: "userns", in: "userns", want: ContainUserns},
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

// TestResolve: what each mode asked for becomes on hosts that allow
// different namespace modes (the probes' answers stand in for the host).
func TestResolve(t *testing.T) {
	noCap := errors.New("creating a PID namespace was refused (no CAP_SYS_ADMIN)")
	noUserns := errors.New("creating a user namespace: operation not permitted (refused: a seccomp profile)")
	tests := []struct {
		name          string
		in            Containment
		pidns, userns error // the probes' answers
		want          Containment
		why           []string // the reason, or the error, contains each
		err           bool
	}{
		{name: "auto as root", in: ContainAuto, want: ContainPidns, why: []string{"strongest available"}},
		{name: "empty is auto", in: "", want: ContainPidns, why: []string{"strongest available"}},
		{name: "auto as root without userns", in: ContainAuto, userns: noUserns, want: ContainPidns},
		{name: "auto without root", in: ContainAuto, pidns: noCap, want: ContainUserns, why: []string{"pidns not available", "CAP_SYS_ADMIN"}},
		{name: "auto without root or userns", in: ContainAuto, pidns: noCap, userns: noUserns, want: ContainPgroup,
			why: []string{"pidns not available", "CAP_SYS_ADMIN", "userns not available", "seccomp"}},
		{name: "pidns as root", in: ContainPidns, want: ContainPidns, why: []string{"asked for"}},
		{name: "pidns without root, userns works", in: ContainPidns, pidns: noCap, err: true,
			why: []string{"pidns is not available", "CAP_SYS_ADMIN", "--containment userns", "pgroup"}},
		{name: "pidns without root or userns", in: ContainPidns, pidns: noCap, userns: noUserns, err: true,
			why: []string{"pidns is not available", "CAP_SYS_ADMIN", "--containment pgroup", "userns is not available either"}},
		{name: "userns where allowed", in: ContainUserns, pidns: noCap, want: ContainUserns, why: []string{"asked for"}},
		{name: "userns as root", in: ContainUserns, want: ContainUserns, why: []string{"asked for"}},
		{name: "userns refused", in: ContainUserns, pidns: noCap, userns: noUserns, err: true,
			why: []string{"userns is not available", "seccomp", "allow unprivileged user namespaces", "--containment pidns", "pgroup"}},
		{name: "pgroup needs no probe", in: ContainPgroup, pidns: noCap, userns: noUserns, want: ContainPgroup, why: []string{"asked for"}},
		{name: "cgroup is not built", in: ContainCgroup, err: true, why: []string{"cgroup is not available", "pidns", "userns", "pgroup"}},
		{name: "none cannot be asked for", in: ContainNone, err: true, why: []string{"none"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			probed := map[string]int{}
			probe := func(name string, err error) func() error {
				return func() error { probed[name]++; return err }
			}
			got, why, err := resolve(tt.in, probes{pidns: probe("pidns", tt.pidns), userns: probe("userns", tt.userns)})
			var ce *elector.ConfigError
			switch {
			case tt.err && (!errors.As(err, &ce) || ce.Field != "containment"):
				t.Fatalf("resolve(%q) = %q, %v; want a ConfigError on containment", tt.in, got, err)
			case !tt.err && (err != nil || got != tt.want):
				t.Fatalf("resolve(%q) = %q (%q), %v; want %q", tt.in, got, why, err, tt.want)
			case tt.err:
				why = err.Error()
			}
			for _, w := range tt.why {
				if !strings.Contains(why, w) {
					t.Errorf("resolve(%q): %q does not say %q", tt.in, why, w)
				}
			}
			if why == "" {
				t.Errorf("resolve(%q) gave no reason", tt.in)
			}
			if tt.in == ContainPgroup && len(probed) > 0 {
				t.Errorf("pgroup ran probes %v", probed)
			}
		})
	}
}

// TestResolveContainment: on this host, each mode resolves as its probe
// says, auto to the strongest that works.
func TestResolveContainment(t *testing.T) {
	pidnsErr, usernsErr := hostProbes.pidns(), hostProbes.userns()
	auto := ContainPgroup
	switch {
	case pidnsErr == nil:
		auto = ContainPidns
	case usernsErr == nil:
		auto = ContainUserns
	}
	t.Logf("this host (euid %d): pidns probe %v; userns probe %v; auto: %s", os.Geteuid(), pidnsErr, usernsErr, auto)
	tests := []struct {
		name string
		in   Containment
		want Containment
		err  bool
	}{
		{name: "pgroup is always there", in: ContainPgroup, want: ContainPgroup},
		{name: "cgroup is not built", in: ContainCgroup, err: true},
		{name: "auto picks the strongest that works", in: ContainAuto, want: auto},
		{name: "pidns as the probe says", in: ContainPidns, want: ContainPidns, err: pidnsErr != nil},
		{name: "userns as the probe says", in: ContainUserns, want: ContainUserns, err: usernsErr != nil},
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

// TestUsernsBlocker: a refused user namespace is explained by the errno
// (the host's sysctls, when one disables them, come first).
func TestUsernsBlocker(t *testing.T) {
	if sysctlIs("user.max_user_namespaces", "0") || sysctlIs("kernel.unprivileged_userns_clone", "0") ||
		sysctlIs("kernel.apparmor_restrict_unprivileged_userns", "1") {
		t.Skip("SKIP: this host disables unprivileged user namespaces: the sysctl is named instead of the errno")
	}
	tests := []struct {
		name string
		err  error
		says string
	}{
		{name: "EPERM", err: syscall.EPERM, says: "seccomp"},
		{name: "EACCES", err: syscall.EACCES, says: "AppArmor"},
		{name: "ENOSPC", err: syscall.ENOSPC, says: "max_user_namespaces"},
		{name: "EINVAL", err: syscall.EINVAL, says: "no user namespaces"},
		{name: "other", err: syscall.EIO, says: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := usernsBlocker(fmt.Errorf("fork/exec: %w", tt.err))
			if !strings.Contains(got, tt.says) || (tt.says == "") != (got == "") {
				t.Fatalf("usernsBlocker(%v) = %q, want it to say %q", tt.err, got, tt.says)
			}
		})
	}
}

// TestNamespacePassesThrough: under the namespace init (pidns, userns) the
// child's exit code, the signal that killed it, its output and environment
// are exactly what they are without it, and forwarded signals reach it.
func TestNamespacePassesThrough(t *testing.T) {
	forModes(t, nsModes, testPassesThrough)
}

func testPassesThrough(t *testing.T, mode Containment) {
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
				Stdout: out, Stderr: errOut, Containment: mode}
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

// TestNamespaceStopReachesWholeTree: the stop signal reaches a setsid'd
// process too (through the init's kill(-1)), so a tree that stops on
// SIGTERM stops gracefully, not by SIGKILL.
func TestNamespaceStopReachesWholeTree(t *testing.T) {
	forModes(t, nsModes, testStopReachesWholeTree)
}

func testStopReachesWholeTree(t *testing.T, mode Containment) {
	// The main process sets its trap before it starts the daemon, so that
	// "daemon" on the output means both traps are set: with the trap after
	// the "&", a stop could reach the main process first, end it by
	// SIGTERM, and with it the namespace, before the daemon wrote
	// "daemon-term" (1 run in 300).
	c, out := runSh(t,
		"trap 'wait; exit 0' TERM; "+
			"setsid sh -c 'trap \"echo daemon-term; exit 0\" TERM; echo daemon; while :; do sleep 0.01; done' & "+
			"while :; do sleep 0.01; done",
		ChildSpec{StopTimeout: 5 * time.Second, Containment: mode})
	out.waitFor(t, "daemon")
	st, err := c.Stop(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Killed || !strings.Contains(out.String(), "daemon-term") {
		t.Fatalf("stop = %+v, output %q: the setsid'd daemon did not get SIGTERM", st, out.String())
	}
}
