package main

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/lockrun"
	"github.com/electd/electd/supervisor"
)

// lockHelp is the description of `electd lock`.
const lockHelp = "Waits for the lock NAME (an election of its own in --store), runs COMMAND once with the same\n" +
	"child handling and environment as run (ELECTD_FENCING_TOKEN, ...), releases the lock and exits with\n" +
	"COMMAND's code (128+N if signal N killed it). If the lease cannot be renewed, COMMAND is stopped\n" +
	"(--stop-signal, then SIGKILL after --stop-timeout) before it could lapse, and electd exits 76.\n" +
	"Flags go before NAME.\n" +
	"\n" +
	"--wait counts from electd's start: opening the store, reconnecting and queueing all fit in it.\n" +
	"\n" +
	"Exit codes:\n" +
	"  COMMAND's own   COMMAND ran (128+N if signal N killed it)\n" +
	"  0               also: --once-per found the run on record, nothing ran\n" +
	"  75              not acquired within --wait: held by another (named); try again later\n" +
	"  69              not acquired within --wait: the store could not be reached (named, with its error)\n" +
	"  76              lock lost while COMMAND ran; COMMAND was stopped\n" +
	"  130, 143        SIGINT, SIGTERM to electd: COMMAND stopped, lock released\n" +
	"  127, 126        COMMAND not found, not executable (nothing was locked)\n" +
	"  2               bad usage or configuration, or --slots differing from the other holders'\n" +
	"  1               runtime failure (e.g. the store refused electd)\n" +
	"\n" +
	"Clearing state by hand: `electd lock --forget NAME` shows NAME's --once-per record (who, when, when it\n" +
	"lapses), clears nothing and exits 2; with --yes it clears the record alone and exits 0 (also with nothing\n" +
	"to clear; 69: store unreachable within --wait, default 10s). A holder of NAME keeps the lock. There is no\n" +
	"eviction: a holder whose lease lapsed is gone from the store already; one whose lease is valid is a live\n" +
	"electd, to be stopped (SIGTERM) on its host. See docs/OPERATIONS.md, \"Clear a stuck job\".\n" +
	"\n" +
	"Recipes:\n" +
	"  # cron on every host; one host runs the job, at most once per day. The others queue, then see\n" +
	"  # the record and exit 0; if the run fails, nothing is recorded and the next host in line runs it.\n" +
	"  0 3 * * * electd lock --store etcd://etcd:2379 --once-per 20h --wait 1h --log-level warn \\\n" +
	"              nightly-report -- /usr/local/bin/report\n" +
	"\n" +
	"  # a schema migration that must never run twice at once; concurrent deploys wait their turn:\n" +
	"  electd lock --store redis://redis:6379 --ttl 30s --wait 15m db-migrate -- ./migrate up\n" +
	"\n" +
	"  # at most 3 heavy jobs at once across the fleet (every copy must say --slots 3):\n" +
	"  electd lock --store etcd://etcd:2379 --slots 3 encoder -- ./encode input.mov"

// lockConfig is everything `electd lock` needs, checked before anything
// starts: what lockrun runs, and how the supervisor starts and stops the
// command.
type lockConfig struct {
	lockrun.Config // Deadline is set at the start
	command        []string
	shell          bool
	stopSignal     syscall.Signal
	stopDefault    bool                   // no --stop-timeout: each term may run with its own timing's default
	contain        supervisor.Containment // as asked for; checked
}

func parseLockConfig(c *cli.Context) (*lockConfig, error) {
	args := c.Args().Slice()
	if len(args) == 0 {
		return nil, usagef("lock needs NAME -- COMMAND [ARG...]")
	}
	if nameMissing(c, args) {
		return nil, usagef("lock needs a NAME before -- (electd lock [flags] NAME -- COMMAND), got only the command %q", args)
	}
	name, rest := args[0], args[1:]
	switch {
	case len(rest) > 0 && rest[0] == "--":
		rest = rest[1:]
	case len(rest) > 0 && strings.HasPrefix(rest[0], "-"):
		return nil, usagef("flag %s after NAME: flags go before NAME (electd lock [flags] NAME -- COMMAND)", rest[0])
	}
	if len(rest) == 0 {
		return nil, usagef("lock %s needs a COMMAND after --", name)
	}
	lc := &lockConfig{Config: lockrun.Config{Wait: -1, OncePer: c.Duration("once-per")}, command: rest, shell: c.Bool("shell")}
	slots, id := c.Int("slots"), c.String("id")
	if c.IsSet("wait") {
		if lc.Wait = c.Duration("wait"); lc.Wait < 0 {
			return nil, elector.Configf("wait", "must not be negative, got %s (leave it out to wait forever)", lc.Wait)
		}
	}
	if err := elector.ValidateSlots(slots); err != nil {
		return nil, err
	}
	switch {
	case c.IsSet("once-per") && lc.OncePer <= 0:
		return nil, elector.Configf("once-per", "must be positive, got %s", lc.OncePer)
	case lc.OncePer > 0 && slots > 1:
		return nil, elector.Configf("once-per", "runs a job once per period, which needs --slots 1, got --slots %d", slots)
	}
	if id == "" {
		return nil, elector.Configf("id", "is empty and the hostname is unknown; set --id")
	}
	timing, err := timingOf(c)
	if err != nil {
		return nil, err
	}
	lc.Candidate = elector.Candidate{Election: name, ID: id, Timing: timing, Slots: slots}
	if _, err := lc.Candidate.Validate(); err != nil {
		var ce *elector.ConfigError
		if errors.As(err, &ce) && ce.Field == "election" {
			return nil, elector.Configf("NAME", "%s", ce.Reason) // the lock's name is its election
		}
		return nil, err
	}
	if lc.stopSignal, err = parseSignal(c.String("stop-signal")); err != nil {
		return nil, err
	}
	lc.stopDefault = !c.IsSet("stop-timeout")
	if lc.StopTimeout, err = supervisor.StopTimeout(timing, c.Duration("stop-timeout"), !lc.stopDefault); err != nil {
		return nil, err
	}
	if lc.contain, err = containmentOf(c); err != nil {
		return nil, err
	}
	if !lc.shell {
		if err := findCommand(lc.command[0]); err != nil {
			return nil, err
		}
	}
	return lc, nil
}

// nameMissing reports whether the positional arguments args came after a
// "--" that ended the flags: `electd lock -- true` gives no NAME, where
// `electd lock true` gives no COMMAND.
func nameMissing(c *cli.Context, args []string) bool {
	argv, _ := c.App.Metadata["argv"].([]string)
	i := len(argv) - len(args) - 1
	return i >= 0 && argv[i] == "--" && slices.Equal(argv[i+1:], args)
}

// findCommand fails early, before the lock is taken, for a command that
// cannot run: 127 when it is not found, 126 when it is not executable, as a
// shell says.
func findCommand(path string) error {
	if _, err := exec.LookPath(path); err != nil {
		code := exitNotFound
		if errors.Is(err, fs.ErrPermission) {
			code = exitNotExecutable
		}
		return &commandError{code: code, err: err}
	}
	return nil
}

func lockAction(c *cli.Context, log *slog.Logger, sigs *shutdownSignals) error {
	switch {
	case c.Bool("forget"):
		return forgetAction(c, log, sigs)
	case c.Bool("yes"):
		return usagef("--yes confirms --forget, and lock got no --forget")
	}
	start := time.Now()
	lc, err := parseLockConfig(c)
	if err != nil {
		return err
	}
	if lc.Wait > 0 {
		// --wait bounds the whole wait: opening the store, reconnecting
		// and queueing alike.
		lc.Deadline = start.Add(lc.Wait)
	}
	name := lc.Candidate.Election
	log = log.With("lock", name)
	lc.Candidate.Logger = log
	octx, opened := sigs.opening(c.Context)
	octx, cancelOpen := lockrun.WithDeadline(octx, lc.Deadline)
	st, el, done, err := openCandidate(octx, c, log, lc.Candidate)
	cancelOpen()
	if sig := opened(); sig != 0 && err != nil {
		return &signalError{sig: sig, while: "the store was still opening; nothing held"}
	}
	if err != nil {
		return err
	}
	sup, err := newSupervisor(log, supervisor.Config{
		Elector: el, Election: name, ID: lc.Candidate.ID,
		Command: lc.command, Shell: lc.shell, Env: childEnv(os.Environ()),
		StopSignal: lc.stopSignal, StopTimeout: lc.StopTimeout, StopTimeoutDefault: lc.stopDefault, OnExit: supervisor.OnExitExit,
		Containment: lc.contain, Logger: log,
	})
	if err != nil {
		done()
		return err
	}
	l := &lockrun.Lock{Config: lc.Config, Log: log, Store: st, El: el, Sup: sup, Notices: c.App.ErrWriter}
	lockErr, sig, err := superviseGroup(c.Context, log, sigs, sup, l.Run)
	lockrun.CloseAfter(lockErr, done, log)
	// SIGTERM or SIGINT, while waiting or running: the child was stopped,
	// the queue left or the lock released; exit 128+signal.
	var se *lockrun.StoppedError
	isStopped := errors.As(lockErr, &se)
	switch {
	case sig != 0:
		e := &signalError{sig: sig}
		if isStopped {
			e.while = se.While
		}
		return e
	case isStopped:
		return se.Err
	case lockErr != nil:
		return lockErr
	}
	return err
}

// forgetAction is `electd lock --forget [--yes] NAME` (lockrun.Forget),
// bounded by --wait (10s when it is unset or 0).
func forgetAction(c *cli.Context, log *slog.Logger, sigs *shutdownSignals) error {
	args := c.Args().Slice()
	if len(args) != 1 {
		return usagef("lock --forget takes NAME alone (electd lock --forget [--yes] NAME), got %q", args)
	}
	cand := elector.Candidate{Election: args[0], ID: "forget-" + sanitizeID(c.String("id")), Logger: log.With("lock", args[0])}
	if err := elector.ValidateName("NAME", cand.Election); err != nil {
		return err
	}
	timeout := 10 * time.Second
	if c.Duration("wait") > 0 {
		timeout = c.Duration("wait")
	}
	ctx, opened := sigs.opening(c.Context)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	st, el, done, err := openCandidate(ctx, c, log, cand)
	if err == nil {
		err = (&lockrun.Forget{Name: args[0], Yes: c.Bool("yes"), El: el, Store: st, Out: c.App.Writer}).Run(ctx)
		done()
	}
	if sig := opened(); sig != 0 {
		return &signalError{sig: sig, while: "run record not cleared, unless the store had done it already"}
	}
	return err
}
