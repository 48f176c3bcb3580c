package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/internal/testenv"
	"github.com/electd/electd/lockrun"
	"github.com/electd/electd/store"
	"github.com/electd/electd/supervisor"
)

// parseLock parses `electd lock ARGS...` with the real flags.
func parseLock(t *testing.T, args ...string) (*lockConfig, error) {
	t.Helper()
	var (
		lc  *lockConfig
		err error
	)
	onUsage := func(_ *cli.Context, uerr error, _ bool) error { return &usageError{err: uerr} }
	app := &cli.App{
		Writer: io.Discard, ErrWriter: io.Discard,
		Commands: []*cli.Command{{
			Name: "lock", Flags: lockFlags(), OnUsageError: onUsage,
			Action: func(c *cli.Context) error {
				lc, err = parseLockConfig(c)
				return nil
			},
		}},
		OnUsageError: onUsage,
	}
	argv := append([]string{"electd", "lock"}, args...)
	app.Metadata = map[string]any{"argv": argv}
	if rerr := app.Run(argv); rerr != nil {
		return nil, rerr
	}
	return lc, err
}

func TestParseLockConfig(t *testing.T) {
	noexec := filepath.Join(t.TempDir(), "script.sh")
	if err := os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		check   func(t *testing.T, lc *lockConfig)
		usage   bool   // a *usageError
		field   string // a *elector.ConfigError on this field
		cmdCode int    // a *commandError with this code
	}{
		{name: "defaults", args: []string{"job", "--", "true"}, check: func(t *testing.T, lc *lockConfig) {
			if lc.Candidate.Election != "job" || !slices.Equal(lc.command, []string{"true"}) || lc.Wait >= 0 || lc.Candidate.Slots != 1 || lc.OncePer != 0 {
				t.Fatalf("config %+v", lc)
			}
			if lc.Candidate.Timing.TTL != elector.DefaultTTL || lc.StopTimeout != 5*time.Second || lc.stopSignal != syscall.SIGTERM {
				t.Fatalf("timing %s, stop %s %s", lc.Candidate.Timing, lc.StopTimeout, lc.stopSignal)
			}
		}},
		{name: "command with arguments", args: []string{"--wait", "0", "job", "--", "sh", "-c", "exit 3"}, check: func(t *testing.T, lc *lockConfig) {
			if lc.Wait != 0 || !slices.Equal(lc.command, []string{"sh", "-c", "exit 3"}) {
				t.Fatalf("config %+v", lc)
			}
		}},
		{name: "without --", args: []string{"job", "true"}, check: func(t *testing.T, lc *lockConfig) {
			if !slices.Equal(lc.command, []string{"true"}) {
				t.Fatalf("command %q", lc.command)
			}
		}},
		{name: "semaphore and once-per", args: []string{"--slots", "4", "--wait", "1m", "job", "--", "true"}, check: func(t *testing.T, lc *lockConfig) {
			if lc.Candidate.Slots != 4 || lc.Wait != time.Minute {
				t.Fatalf("config %+v", lc)
			}
		}},
		{name: "no name", args: nil, usage: true},
		{name: "no command", args: []string{"job", "--"}, usage: true},
		{name: "flag after name", args: []string{"job", "--wait", "0", "--", "true"}, usage: true},
		{name: "unknown flag", args: []string{"--election", "x", "job", "--", "true"}, usage: true},
		{name: "negative wait", args: []string{"--wait", "-1s", "job", "--", "true"}, field: "wait"},
		{name: "zero slots", args: []string{"--slots", "0", "job", "--", "true"}, field: "slots"},
		{name: "zero once-per", args: []string{"--once-per", "0s", "job", "--", "true"}, field: "once-per"},
		{name: "once-per with slots", args: []string{"--once-per", "1h", "--slots", "2", "job", "--", "true"}, field: "once-per"},
		{name: "stop-timeout too long", args: []string{"--ttl", "2s", "--stop-timeout", "5s", "job", "--", "true"}, field: "stop-timeout"},
		{name: "containment pgroup", args: []string{"--containment", "pgroup", "job", "--", "true"}, check: func(t *testing.T, lc *lockConfig) {
			if lc.contain != supervisor.ContainPgroup {
				t.Fatalf("containment %q", lc.contain)
			}
		}},
		{name: "containment auto by default", args: []string{"job", "--", "true"}, check: func(t *testing.T, lc *lockConfig) {
			if lc.contain != supervisor.ContainAuto {
				t.Fatalf("containment %q, want auto (resolved by supervisor.New)", lc.contain)
			}
		}},
		{name: "containment unknown", args: []string{"--containment", "jail", "job", "--", "true"}, field: "containment"},
		{name: "containment cgroup is not built", args: []string{"--containment", "cgroup", "job", "--", "true"}, field: "containment"},
		{name: "command not found", args: []string{"job", "--", "/nonexistent/electd-lock-test"}, cmdCode: 127},
		{name: "command not executable", args: []string{"job", "--", noexec}, cmdCode: 126},
		{name: "shell skips the lookup", args: []string{"--shell", "job", "--", "nonexistent-command"}, check: func(t *testing.T, lc *lockConfig) {
			if !lc.shell {
				t.Fatal("shell not set")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lc, err := parseLock(t, tt.args...)
			var (
				ue *usageError
				ce *elector.ConfigError
				me *commandError
			)
			switch {
			case tt.usage:
				if !errors.As(err, &ue) {
					t.Fatalf("err = %v, want a usage error", err)
				}
			case tt.field != "":
				if !errors.As(err, &ce) || ce.Field != tt.field {
					t.Fatalf("err = %v, want a ConfigError on %s", err, tt.field)
				}
			case tt.cmdCode != 0:
				if !errors.As(err, &me) || me.code != tt.cmdCode {
					t.Fatalf("err = %v, want a commandError %d", err, tt.cmdCode)
				}
			default:
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				tt.check(t, lc)
			}
		})
	}
}

func TestLockExitCodes(t *testing.T) {
	lost := &supervisor.TermEndedError{Reason: "deadline", Status: supervisor.ExitStatus{Signal: syscall.SIGTERM}}
	tests := []struct {
		name string
		err  error
		code int
		says string // in the printed line; empty: nothing printed
	}{
		{"command's code", &supervisor.ExitError{Status: supervisor.ExitStatus{Code: 3}}, 3, ""},
		{"command killed", &supervisor.ExitError{Status: supervisor.ExitStatus{Code: -1, Signal: syscall.SIGKILL}}, 137, ""},
		{"busy", &lockrun.BusyError{Name: "job", Wait: 0, Slots: 1, Holder: "h1 (token 7)"}, 75, "lock job: not acquired at once (--wait 0); held by h1 (token 7)"},
		{"busy within wait", &lockrun.BusyError{Name: "job", Wait: time.Second, Slots: 3}, 75, "all 3 slots of job: not acquired within --wait 1s"},
		{"store unreachable", &store.UnreachableError{What: "lock job: not acquired within --wait 1s", Store: "redis://h:6379", Err: errors.New("connection refused")}, 69,
			"lock job: not acquired within --wait 1s: the store redis://h:6379 cannot be reached: connection refused"},
		{"lost", &lockrun.LostError{Name: "job", Err: lost}, 76, "lock job lost while the command ran (deadline); the command was stopped (code 143)"},
		{"SIGTERM", &signalError{sig: syscall.SIGTERM, while: "lock released"}, 143, "stopped by SIGTERM: lock released"},
		{"SIGINT", &signalError{sig: syscall.SIGINT}, 130, "stopped by SIGINT"},
		{"not found", &commandError{code: exitNotFound, err: errors.New("exec: \"x\": not found")}, 127, "not found"},
		{"slots mismatch", fmt.Errorf("campaign: %w", &elector.SlotsError{Election: "job", Mine: 3, Theirs: 2}), 2, "has 3 slot(s) but the candidates already queued have 2"},
		{"forget unconfirmed", &lockrun.UnconfirmedError{Name: "job", Record: elector.RunRecord{ID: "h1", Token: 7}}, 2, "nothing cleared: add --yes to clear it"},
		{"store failure", fmt.Errorf("lock job: read the run record: %w", &elector.StoreError{Op: "last-run", Err: context.DeadlineExceeded}), 1, "read the run record"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if code := exitCode(tt.err, &out); code != tt.code {
				t.Fatalf("exitCode(%v) = %d, want %d", tt.err, code, tt.code)
			}
			if tt.says == "" && out.Len() != 0 || !strings.Contains(out.String(), tt.says) {
				t.Fatalf("printed %q, want %q", out.String(), tt.says)
			}
			if strings.Count(out.String(), "\n") > 1 {
				t.Fatalf("printed more than one line: %q", out.String())
			}
		})
	}
}

// TestLockBusyOrUnreachable: `electd lock --wait` tells a lock held by
// another (75, naming the holder) from a store that cannot be reached (69,
// naming the store and its error), and --wait bounds the whole wait, the
// opening of the store and the reconnecting included.
func TestLockBusyOrUnreachable(t *testing.T) {
	const wait = 3 * time.Second
	etcd := testenv.StartEtcd(t)
	rd := testenv.StartRedis(t)
	deadEtcd := testenv.StartEtcd(t)
	deadEtcd.Kill(t)
	deadRedis := testenv.StartRedis(t)
	deadRedis.Kill(t)
	deadRedlock := testenv.StartRedlock(t, 3)
	deadRedlock.KillAll(t)
	tests := []struct {
		name  string
		store string
		held  bool // another copy holds the lock
		code  int
		says  []string
	}{
		{name: "etcd held", store: "etcd://" + etcd.Endpoint(), held: true, code: exitLockBusy,
			says: []string{"lock job: not acquired within --wait 3s; held by holder (token "}},
		{name: "redis held", store: "redis://" + rd.Addr(), held: true, code: exitLockBusy,
			says: []string{"lock job: not acquired within --wait 3s; held by holder (token "}},
		{name: "etcd killed", store: "etcd://" + deadEtcd.Endpoint(), code: exitNoStore,
			says: []string{"lock job: not acquired within --wait 3s: the store etcd://" + deadEtcd.Endpoint() + " cannot be reached: "}},
		{name: "etcd black hole", store: "etcd://" + blackHole(t), code: exitNoStore,
			says: []string{"cannot be reached: "}},
		{name: "redis killed", store: "redis://" + deadRedis.Addr(), code: exitNoStore,
			says: []string{"the store redis://" + deadRedis.Addr() + " cannot be reached: ", "connection refused"}},
		{name: "redlock killed", store: deadRedlock.URL(), code: exitNoStore,
			says: []string{"the store " + deadRedlock.URL() + " cannot be reached: ", "0 of 3 redlock servers answered"}},
	}
	// What starting and ending electd costs here (more under -race and
	// on a loaded machine), to be allowed beyond the wait.
	start := time.Now()
	if r := runElectd(t, time.Minute, nil, "version"); r.code != 0 {
		t.Fatalf("electd version:\n%s", r)
	}
	overhead := time.Since(start)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.held {
				ctx, cancel := context.WithCancel(context.Background())
				holder := electdCmd(ctx, t, nil, "lock", "--store", tc.store, "--id", "holder", "job", "--", "sleep", "600")
				var errb lockedBuffer
				holder.Stderr = &errb
				if err := holder.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { cancel(); _ = holder.Wait() })
				waitLog(t, &errb, "lock acquired")
			}
			start := time.Now()
			r := runElectd(t, time.Minute, nil, "lock", "--store", tc.store, "--id", "waiter", "--wait", wait.String(),
				"--log-level", "error", "job", "--", "true")
			took := time.Since(start)
			t.Logf("exit %d after %v: %s", r.code, took.Round(time.Millisecond), strings.TrimSpace(r.stderr))
			if r.code != tc.code {
				t.Fatalf("want exit %d:\n%s", tc.code, r)
			}
			for _, s := range tc.says {
				if !strings.Contains(r.stderr, s) {
					t.Fatalf("stderr does not say %q:\n%s", s, r)
				}
			}
			// At most lockrun.MaxOverrun past --wait, and the
			// process's start and exit; before, a store that was down
			// stretched a 5 s wait to 11 s.
			if limit := wait + lockrun.MaxOverrun + 2*overhead + 500*time.Millisecond; took > limit {
				t.Fatalf("--wait %v took %v (more than %v)", wait, took.Round(time.Millisecond), limit)
			}
		})
	}
}

// TestLockHelpExitCodes: `electd lock --help` lists every exit code lock
// can end with.
func TestLockHelpExitCodes(t *testing.T) {
	r := runElectd(t, time.Minute, nil, "lock", "--help")
	tests := []struct {
		name string
		code string
	}{
		{name: "busy", code: strconv.Itoa(exitLockBusy)},
		{name: "store unreachable", code: strconv.Itoa(exitNoStore)},
		{name: "lost", code: strconv.Itoa(exitLockLost)},
		{name: "usage", code: strconv.Itoa(exitUsage)},
		{name: "failure", code: strconv.Itoa(exitFailure)},
		{name: "not found", code: strconv.Itoa(exitNotFound)},
		{name: "not executable", code: strconv.Itoa(exitNotExecutable)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !regexp.MustCompile(`(?m)^\s+(\d+, )*` + tc.code + `\b`).MatchString(r.stdout) {
				t.Fatalf("lock --help does not list exit code %s in its table:\n%s", tc.code, r.stdout)
			}
		})
	}
}
