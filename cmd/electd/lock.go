package main

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/electd/electd/store"
	"github.com/electd/electd/supervisor"
)

// lockHelp is the description of `electd lock`.
const lockHelp = "Waits for the lock NAME (an election of its own in --store), runs COMMAND once with the same\n" +
	"child handling and environment as run (ELECTD_FENCING_TOKEN, ...), releases the lock and exits with\n" +
	"COMMAND's code (128+N if signal N killed it). If the lease cannot be renewed, COMMAND is stopped\n" +
	"(--stop-signal, then SIGKILL after --stop-timeout) before it could lapse, and electd exits 76.\n" +
	"Flags go before NAME.\n" +
	"\n" +
	"Exit codes: COMMAND's own; 75 not acquired within --wait (the holder is named); 76 lock lost while\n" +
	"COMMAND ran (it was stopped); 130/143 SIGINT/SIGTERM to electd (COMMAND stopped, lock released);\n" +
	"127/126 COMMAND not found/not executable; 2 bad usage or configuration, or --slots differing\n" +
	"from the other holders'; 1 runtime failure (e.g. the store refused electd).\n" +
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

// lockConfig is everything `electd lock` needs, checked before anything starts.
type lockConfig struct {
	name, id    string
	command     []string
	shell       bool
	wait        time.Duration     // < 0: forever; 0: try once
	oncePer     time.Duration     // 0: off
	cand        elector.Candidate // validated
	timing      elector.Timing
	stopSignal  syscall.Signal
	stopTimeout time.Duration
	contain     supervisor.Containment // as asked for; checked
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
	lc := &lockConfig{name: name, id: c.String("id"), command: rest, shell: c.Bool("shell"),
		wait: -1, oncePer: c.Duration("once-per")}
	slots := c.Int("slots")
	if c.IsSet("wait") {
		if lc.wait = c.Duration("wait"); lc.wait < 0 {
			return nil, elector.Configf("wait", "must not be negative, got %s (leave it out to wait forever)", lc.wait)
		}
	}
	if err := elector.ValidateSlots(slots); err != nil {
		return nil, err
	}
	switch {
	case c.IsSet("once-per") && lc.oncePer <= 0:
		return nil, elector.Configf("once-per", "must be positive, got %s", lc.oncePer)
	case lc.oncePer > 0 && slots > 1:
		return nil, elector.Configf("once-per", "runs a job once per period, which needs --slots 1, got --slots %d", slots)
	}
	if lc.id == "" {
		return nil, elector.Configf("id", "is empty and the hostname is unknown; set --id")
	}
	var err error
	if lc.timing, err = timingOf(c); err != nil {
		return nil, err
	}
	lc.cand = elector.Candidate{Election: name, ID: lc.id, Timing: lc.timing, Slots: slots}
	if _, err := lc.cand.Validate(); err != nil {
		var ce *elector.ConfigError
		if errors.As(err, &ce) && ce.Field == "election" {
			return nil, elector.Configf("NAME", "%s", ce.Reason) // the lock's name is its election
		}
		return nil, err
	}
	if lc.stopSignal, err = parseSignal(c.String("stop-signal")); err != nil {
		return nil, err
	}
	if lc.stopTimeout, err = supervisor.StopTimeout(lc.timing, c.Duration("stop-timeout"), c.IsSet("stop-timeout")); err != nil {
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
	lc, err := parseLockConfig(c)
	if err != nil {
		return err
	}
	log = log.With("lock", lc.name)
	lc.cand.Logger = log
	octx, opened := sigs.opening(c.Context)
	st, el, done, err := openCandidate(octx, c, log, lc.cand)
	if sig := opened(); sig != 0 && err != nil {
		return &signalError{sig: sig, while: "the store was still opening; nothing held"}
	}
	if err != nil {
		return err
	}
	defer done()
	sup, err := newSupervisor(log, supervisor.Config{
		Elector: el, Timing: lc.timing, Election: lc.name, ID: lc.id,
		Command: lc.command, Shell: lc.shell, Env: childEnv(os.Environ()),
		StopSignal: lc.stopSignal, StopTimeout: lc.stopTimeout, OnExit: supervisor.OnExitExit,
		Containment: lc.contain, Logger: log,
	})
	if err != nil {
		return err
	}
	l := &locking{c: c, log: log, store: st, el: el, sup: sup, lc: lc}
	lockErr, sig, err := superviseGroup(c.Context, log, sigs, sup, l.run)
	// SIGTERM or SIGINT, while waiting or running: the child was stopped,
	// the queue left or the lock released; exit 128+signal.
	var se *stoppedError
	isStopped := errors.As(lockErr, &se)
	switch {
	case sig != 0:
		e := &signalError{sig: sig}
		if isStopped {
			e.while = se.while
		}
		return e
	case isStopped:
		return se.err
	case lockErr != nil:
		return lockErr
	}
	return err
}

// locking is one `electd lock`: wait, run the command once, release.
type locking struct {
	c     *cli.Context
	log   *slog.Logger
	store *store.Store
	el    elector.Locker
	sup   *supervisor.Supervisor
	lc    *lockConfig
}

// run takes the lock, runs the command under it and releases it. When ctx
// ends first (a signal), it returns a *stoppedError saying what it did.
func (l *locking) run(ctx context.Context) error {
	lc, log := l.lc, l.log
	if lc.oncePer > 0 {
		// A first look saves the wait; an unanswered one is not fatal: the
		// look after acquiring is the one that counts.
		done, err := l.alreadyDone(ctx)
		if done || ctx.Err() != nil {
			return stopped(ctx, nil, "")
		}
		if err != nil {
			log.Warn("cannot read the run record yet; will look again once the lock is held", "err", err)
		}
	}
	log.Debug("waiting for the lock", "id", lc.id, "store", l.store.Redacted(), "wait", waitText(lc.wait),
		"slots", lc.cand.Slots, "timing", lc.timing.String(), "stop_timeout", lc.stopTimeout)
	start := time.Now()
	term, err := acquire(ctx, l.el, lc)
	if err != nil {
		if errors.Is(err, elector.ErrBusy) || errors.Is(err, errWaitExpired) {
			be := &lockBusyError{name: lc.name, wait: lc.wait, slots: lc.cand.Slots, holder: holderOf(l.el)}
			if be.holder == "" {
				pctx, pcancel := context.WithTimeout(context.Background(), 2*time.Second)
				be.storeErr = l.store.Ping(pctx)
				pcancel()
			}
			return be
		}
		return stopped(ctx, err, "left the queue while waiting; nothing held")
	}
	log.Info("lock acquired", "token", term.Token, "waited", time.Since(start).Round(time.Millisecond),
		"valid_until", term.ValidUntil())

	if lc.oncePer > 0 {
		// Another holder may have finished the job while we waited. If the
		// record cannot be read, do not risk a second run.
		if done, err := l.alreadyDone(ctx); done || err != nil {
			rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), lc.timing.RenewInterval+time.Second)
			defer rcancel()
			if rerr := term.Resign(rctx); rerr != nil {
				log.Warn("release failed; the lease will expire on the store", "err", rerr)
			}
			return stopped(ctx, err, "lock released")
		}
	}

	var recordErr error
	started := time.Now()
	err = l.sup.RunOnce(ctx, term, func(ctx context.Context, st supervisor.ExitStatus) {
		if lc.oncePer > 0 && st.ExitCode() == 0 {
			recordErr = l.recordRun(ctx, term, started)
		}
	})
	var (
		te *supervisor.TermEndedError
		ie *supervisor.InterruptedError
	)
	switch {
	case errors.As(err, &te):
		return &lockLostError{name: lc.name, err: te}
	case errors.As(err, &ie):
		return stopped(ctx, err, fmt.Sprintf("command stopped (code %d), lock released", ie.Status.ExitCode()))
	case recordErr != nil:
		return fmt.Errorf("lock %s: the command succeeded but its run could not be recorded, so another copy may run it again within --once-per: %w", lc.name, recordErr)
	}
	return err // an *ExitError with the command's code, or a start failure
}

// errWaitExpired is the cause of the --wait context's end.
var errWaitExpired = errors.New("wait expired")

// acquire takes the lock: TryCampaign for --wait 0, else Campaign bounded
// by --wait (if not forever).
func acquire(ctx context.Context, el elector.Locker, lc *lockConfig) (*elector.Term, error) {
	if lc.wait == 0 {
		// A free Redis election may take one TTL (see Locker.TryCampaign); an
		// unreachable store must not keep a try waiting for ever.
		tctx, cancel := context.WithTimeoutCause(ctx, lc.timing.TTL+2*lc.timing.RenewInterval+time.Second, errWaitExpired)
		defer cancel()
		term, err := el.TryCampaign(tctx)
		if err != nil && errors.Is(context.Cause(tctx), errWaitExpired) {
			return nil, errWaitExpired
		}
		return term, err
	}
	if lc.wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, lc.wait, errWaitExpired)
		defer cancel()
	}
	term, err := el.Campaign(ctx)
	if err != nil && errors.Is(context.Cause(ctx), errWaitExpired) {
		return nil, errWaitExpired
	}
	return term, err
}

// stopped returns err, and if ctx has ended (a signal), says what was done
// about it: while, e.g. "lock released".
func stopped(ctx context.Context, err error, while string) error {
	if ctx.Err() != nil {
		return &stoppedError{while: while, err: err}
	}
	return err
}

// stoppedError: ctx ended (a signal) while the lock was waited for or held.
type stoppedError struct {
	while string
	err   error
}

func (e *stoppedError) Error() string {
	if e.err == nil {
		return "stopped: " + e.while
	}
	return fmt.Sprintf("stopped: %s: %v", e.while, e.err)
}
func (e *stoppedError) Unwrap() error { return e.err }

// holderOf names who holds the lock, for the "not acquired" message; empty
// when the store does not say in time.
func holderOf(el elector.Elector) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	l, err := el.Leader(ctx)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%s (token %d)", l.ID, l.Token)
}

// alreadyDone reports whether a successful run is on record within
// --once-per, and says so (unless --log-level is above info).
func (l *locking) alreadyDone(ctx context.Context) (bool, error) {
	lc, log := l.lc, l.log
	rctx, cancel := context.WithTimeout(ctx, max(lc.timing.RenewInterval, 2*time.Second))
	defer cancel()
	r, err := l.el.LastRun(rctx)
	switch {
	case errors.Is(err, elector.ErrNoRun):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("lock %s: read the run record: %w", lc.name, err)
	}
	if log.Enabled(ctx, slog.LevelInfo) {
		fmt.Fprintf(l.c.App.ErrWriter, "electd: %s: already run by %s at %s (token %d); not running again before %s (--once-per)\n",
			lc.name, r.ID, r.Finished.UTC().Format(time.RFC3339), r.Token, r.Expires.UTC().Format(time.RFC3339))
	}
	return true, nil
}

// recordRun records a successful run while the lock is still held, retrying
// transient store errors until the lease's deadline.
func (l *locking) recordRun(ctx context.Context, term *elector.Term, started time.Time) error {
	lc, log := l.lc, l.log
	now := time.Now()
	r := elector.RunRecord{ID: lc.id, Token: term.Token, Started: started.UTC(), Finished: now.UTC(), Expires: now.Add(lc.oncePer).UTC()}
	ctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), term.ValidUntil())
	defer cancel()
	backoff := 50 * time.Millisecond
	for {
		cctx, ccancel := context.WithTimeout(ctx, max(lc.timing.RenewInterval, time.Second))
		err := l.el.RecordRun(cctx, r, lc.oncePer)
		ccancel()
		if err == nil {
			log.Info("run recorded", "token", r.Token, "until", r.Expires)
			return nil
		}
		var se *elector.StoreError
		if !errors.As(err, &se) || se.Permanent {
			return err
		}
		log.Warn("recording the run failed; retrying", "err", err)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return err
		}
		backoff = min(2*backoff, time.Second)
	}
}

func waitText(d time.Duration) string {
	if d < 0 {
		return "forever"
	}
	return d.String()
}
