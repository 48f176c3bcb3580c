package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/supervisor"
)

func lockCommand() *cli.Command {
	return &cli.Command{
		Name:      "lock",
		Usage:     "take the lock NAME, run COMMAND once, release, exit with its code",
		ArgsUsage: "NAME -- COMMAND [ARG...]",
		Description: "Waits for the lock NAME (an election of its own in --store), runs COMMAND once with the same\n" +
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
			"  electd lock --store etcd://etcd:2379 --slots 3 encoder -- ./encode input.mov",
		Flags:  lockFlags(),
		Action: lockAction,
	}
}

// lockConfig is everything `electd lock` needs, checked before anything starts.
type lockConfig struct {
	name, id    string
	command     []string
	shell       bool
	wait        time.Duration // < 0: forever; 0: try once
	slots       int
	oncePer     time.Duration // 0: off
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
		wait: -1, slots: c.Int("slots"), oncePer: c.Duration("once-per")}
	if c.IsSet("wait") {
		if lc.wait = c.Duration("wait"); lc.wait < 0 {
			return nil, elector.Configf("wait", "must not be negative, got %s (leave it out to wait forever)", lc.wait)
		}
	}
	if err := elector.ValidateSlots(lc.slots); err != nil {
		return nil, err
	}
	switch {
	case c.IsSet("once-per") && lc.oncePer <= 0:
		return nil, elector.Configf("once-per", "must be positive, got %s", lc.oncePer)
	case lc.oncePer > 0 && lc.slots > 1:
		return nil, elector.Configf("once-per", "runs a job once per period, which needs --slots 1, got --slots %d", lc.slots)
	}
	if lc.id == "" {
		return nil, elector.Configf("id", "is empty and the hostname is unknown; set --id")
	}
	var err error
	if lc.timing, err = timingOf(c); err != nil {
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

func lockAction(c *cli.Context) error {
	lc, err := parseLockConfig(c)
	if err != nil {
		return err
	}
	log, err := newLogger(c)
	if err != nil {
		return err
	}
	log = log.With("lock", lc.name)

	// SIGTERM or SIGINT, while waiting or running: stop the child, leave or
	// release, exit 128+signal. The signal is the context's cause.
	ctx, cancel := context.WithCancelCause(c.Context)
	defer cancel(nil)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	go func() {
		select {
		case s := <-sigs:
			sig, _ := s.(syscall.Signal)
			log.Info("signal received; stopping", "signal", s.String())
			cancel(&signalError{sig: sig})
		case <-ctx.Done():
		}
	}()

	st, err := openStore(c)
	if err != nil {
		return err
	}
	defer func() {
		if err := st.close(); err != nil {
			log.Warn("closing the store connection", "err", err)
		}
	}()
	el, err := st.newElector(candidate{election: lc.name, id: lc.id, timing: lc.timing, log: log})
	if err != nil {
		return err
	}
	defer func() {
		if err := el.Close(); err != nil {
			log.Warn("closing the elector", "err", err)
		}
	}()
	if err := setSlots(el, lc.slots); err != nil {
		return err
	}
	var rec elector.RunRecorder
	if lc.oncePer > 0 {
		var ok bool
		if rec, ok = el.(elector.RunRecorder); !ok {
			return elector.Configf("once-per", "this store backend keeps no run records")
		}
		// A first look saves the wait; an unanswered one is not fatal: the
		// look after acquiring is the one that counts.
		done, err := alreadyDone(ctx, c, log, rec, lc)
		if done || ctx.Err() != nil {
			return interrupted(ctx, nil, "")
		}
		if err != nil {
			log.Warn("cannot read the run record yet; will look again once the lock is held", "err", err)
		}
	}

	sup, err := supervisor.New(supervisor.Config{
		Elector: el, Timing: lc.timing, Election: lc.name, ID: lc.id,
		Command: lc.command, Shell: lc.shell, Env: childEnv(os.Environ()),
		StopSignal: lc.stopSignal, StopTimeout: lc.stopTimeout, OnExit: supervisor.OnExitExit,
		Containment: lc.contain, Logger: log,
	})
	if err != nil {
		return err
	}
	if err := supervisor.BecomeSubreaper(); err != nil {
		log.Warn("cannot become child subreaper; orphaned grandchildren will go to init", "err", err)
	}
	mode, why := sup.Containment()
	log.Info("containment", "mode", mode, "why", why)
	helpers, stopHelpers := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { supervisor.ForwardSignals(helpers, sup.Child, log) })
	wg.Go(func() { supervisor.ReapOrphans(helpers, log) })
	defer wg.Wait()
	defer stopHelpers()

	log.Debug("waiting for the lock", "id", lc.id, "store", st.url.redacted, "wait", waitText(lc.wait),
		"slots", lc.slots, "timing", lc.timing.String(), "stop_timeout", lc.stopTimeout)
	start := time.Now()
	term, err := acquire(ctx, el, lc)
	if err != nil {
		if errors.Is(err, elector.ErrBusy) || errors.Is(err, errWaitExpired) {
			be := &lockBusyError{name: lc.name, wait: lc.wait, slots: lc.slots, holder: holderOf(el)}
			if be.holder == "" {
				pctx, pcancel := context.WithTimeout(context.Background(), 2*time.Second)
				be.storeErr = st.ping(pctx)
				pcancel()
			}
			return be
		}
		return interrupted(ctx, err, "left the queue while waiting; nothing held")
	}
	log.Info("lock acquired", "token", term.Token, "waited", time.Since(start).Round(time.Millisecond),
		"valid_until", term.ValidUntil())

	if rec != nil {
		// Another holder may have finished the job while we waited. If the
		// record cannot be read, do not risk a second run.
		if done, err := alreadyDone(ctx, c, log, rec, lc); done || err != nil {
			rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), lc.timing.RenewInterval+time.Second)
			defer rcancel()
			if rerr := term.Resign(rctx); rerr != nil {
				log.Warn("release failed; the lease will expire on the store", "err", rerr)
			}
			return interrupted(ctx, err, "lock released")
		}
	}

	var recordErr error
	started := time.Now()
	err = sup.RunOnce(ctx, term, func(ctx context.Context, st supervisor.ExitStatus) {
		if rec != nil && st.ExitCode() == 0 {
			recordErr = recordRun(ctx, log, rec, term, lc, started)
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
		return interrupted(ctx, err, fmt.Sprintf("command stopped (code %d), lock released", ie.Status.ExitCode()))
	case recordErr != nil:
		return fmt.Errorf("lock %s: the command succeeded but its run could not be recorded, so another copy may run it again within --once-per: %w", lc.name, recordErr)
	}
	return err // an *ExitError with the command's code, or a start failure
}

// errWaitExpired is the cause of the --wait context's end.
var errWaitExpired = errors.New("wait expired")

// acquire takes the lock: TryCampaign for --wait 0, else Campaign bounded
// by --wait (if not forever).
func acquire(ctx context.Context, el elector.Elector, lc *lockConfig) (*elector.Term, error) {
	if lc.wait == 0 {
		tc, ok := el.(elector.TryCampaigner)
		if !ok {
			return nil, elector.Configf("wait", "0 (try once) is not supported by this store backend")
		}
		// A free Redis election may take one TTL (see TryCampaigner); an
		// unreachable store must not keep a try waiting for ever.
		tctx, cancel := context.WithTimeoutCause(ctx, lc.timing.TTL+2*lc.timing.RenewInterval+time.Second, errWaitExpired)
		defer cancel()
		term, err := tc.TryCampaign(tctx)
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

// interrupted returns the signal that ended ctx, if one did, instead of
// err; while says what electd was doing.
func interrupted(ctx context.Context, err error, while string) error {
	var se *signalError
	if errors.As(context.Cause(ctx), &se) {
		return &signalError{sig: se.sig, while: while}
	}
	return err
}

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
func alreadyDone(ctx context.Context, c *cli.Context, log *slog.Logger, rec elector.RunRecorder, lc *lockConfig) (bool, error) {
	rctx, cancel := context.WithTimeout(ctx, max(lc.timing.RenewInterval, 2*time.Second))
	defer cancel()
	r, err := rec.LastRun(rctx)
	switch {
	case errors.Is(err, elector.ErrNoRun):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("lock %s: read the run record: %w", lc.name, err)
	}
	if log.Enabled(ctx, slog.LevelInfo) {
		fmt.Fprintf(c.App.ErrWriter, "electd: %s: already run by %s at %s (token %d); not running again before %s (--once-per)\n",
			lc.name, r.ID, r.Finished.UTC().Format(time.RFC3339), r.Token, r.Expires.UTC().Format(time.RFC3339))
	}
	return true, nil
}

// recordRun records a successful run while the lock is still held, retrying
// transient store errors until the lease's deadline.
func recordRun(ctx context.Context, log *slog.Logger, rec elector.RunRecorder, term *elector.Term, lc *lockConfig, started time.Time) error {
	now := time.Now()
	r := elector.RunRecord{ID: lc.id, Token: term.Token, Started: started.UTC(), Finished: now.UTC(), Expires: now.Add(lc.oncePer).UTC()}
	ctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), term.ValidUntil())
	defer cancel()
	backoff := 50 * time.Millisecond
	for {
		cctx, ccancel := context.WithTimeout(ctx, max(lc.timing.RenewInterval, time.Second))
		err := rec.RecordRun(cctx, r, lc.oncePer)
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

// lockBusyError: the lock was not acquired within --wait (exit 75).
type lockBusyError struct {
	name     string
	wait     time.Duration
	slots    int
	holder   string // empty when unknown
	storeErr error  // when the holder is unknown: the store's answer to a ping
}

func (e *lockBusyError) Error() string {
	what := "lock " + e.name
	if e.slots > 1 {
		what = fmt.Sprintf("all %d slots of %s", e.slots, e.name)
	}
	when := "at once (--wait 0)"
	if e.wait > 0 {
		when = "within --wait " + e.wait.String()
	}
	msg := fmt.Sprintf("%s: not acquired %s", what, when)
	switch {
	case e.holder != "" && e.slots > 1:
		msg += "; first holder " + e.holder
	case e.holder != "":
		msg += "; held by " + e.holder
	case e.storeErr != nil:
		msg += "; the store does not answer: " + e.storeErr.Error()
	}
	return msg
}

// lockLostError: the lock was lost while the command ran; it was stopped
// (exit 76).
type lockLostError struct {
	name string
	err  *supervisor.TermEndedError
}

func (e *lockLostError) Error() string {
	if e.err.NotStarted {
		return fmt.Sprintf("lock %s lost before the command could start (%s); it did not run", e.name, e.err.Reason)
	}
	return fmt.Sprintf("lock %s lost while the command ran (%s); the command was stopped (code %d) before the lease could lapse",
		e.name, e.err.Reason, e.err.Status.ExitCode())
}

func (e *lockLostError) Unwrap() error { return e.err }

// signalError: electd was asked to stop by a signal (exit 128+signal).
type signalError struct {
	sig   syscall.Signal
	while string // what was done about it, e.g. "command stopped, lock released"
}

func (e *signalError) Error() string {
	if e.while == "" {
		return "stopped by " + signalNameOf(e.sig)
	}
	return fmt.Sprintf("stopped by %s: %s", signalNameOf(e.sig), e.while)
}

func signalNameOf(sig syscall.Signal) string {
	for name, s := range signals {
		if s == sig {
			return "SIG" + name
		}
	}
	return sig.String()
}

// commandError: COMMAND cannot run (exit 127 or 126), found before the
// lock is taken.
type commandError struct {
	code int
	err  error
}

func (e *commandError) Error() string { return e.err.Error() }
func (e *commandError) Unwrap() error { return e.err }
