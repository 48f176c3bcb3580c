package supervisor

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/electd/electd/clock"
	"github.com/electd/electd/supervisor/internal/nsinit"
)

// Under pidns and userns a child starts in two steps: PrepareChild forks
// the namespace init, which waits, ready, for the go message; Begin sends
// it (the term's start-by moment and the environment with its fencing
// token), and the init forks and execs the command. StartChild does both at
// once. A candidate prepares while it waits for a term
// (Supervisor.PrepareChild), so the term's start costs the command's fork
// and exec, not the start of an init (the Go runtime of electd's binary:
// about 4–6 ms here).
//
// A prepared init runs nothing: no process of the command exists until
// Begin, and the init's pid namespace then holds the command's whole tree.
// It dies with electd (its Pdeathsig, and the end of its control pipe),
// and Release ends one that is not needed.

var (
	// errInitSlow: a prepared init was not ready by its deadline, and was
	// killed.
	errInitSlow = errors.New("the namespace init was not ready in time; killed")
	// errInitGone: the init ended before it had the go message (killed,
	// or dead of its own), so the command never ran; the namespace is
	// gone and reaped.
	errInitGone = errors.New("the namespace init ended before starting the command")
	// errInitLost: the init ended after it was sent the go message and
	// before it reported the command started or why not. The namespace,
	// and anything in it, is gone and reaped, but the command may have run
	// (with the term's token): a new init must not start it again for the
	// same term.
	errInitLost = errors.New("the namespace init ended before it reported the command started; the command may have run")
)

// errPrepareCancelled: the preparation was given up (cancel was closed)
// before the init was ready, and the init was killed.
var errPrepareCancelled = errors.New("the namespace init's preparation was given up; killed")

// prepare forks the namespace init (PrepareChild), given up (the init
// killed) once cancel is closed.
func (t nsTree) prepare(spec ChildSpec, log *slog.Logger, killBy time.Time, cancel <-chan struct{}) (*Child, error) {
	c, fa, err := newChild(spec, log, t)
	if err != nil {
		return nil, fmt.Errorf("prepare child: %w", err)
	}
	fa.attr.Env = []string{} // the command's comes with the go message
	if fa.closeAfterStart, err = c.initPipes(fa.attr, fa.closeAfterStart); err != nil {
		for _, f := range fa.closeAfterStart {
			f.Close()
		}
		c.closeOutputs()
		return nil, fmt.Errorf("prepare child: %w", err)
	}
	nsAttr(fa.attr.Sys, t.label)
	fa.argv = append([]string{t.arg0, fa.path}, fa.argv...)
	fa.path = selfExe
	if err := c.fork(fa, 0); err != nil {
		c.closeOutputs()
		c.closeInitPipes()
		return nil, fmt.Errorf("prepare child: %w", err)
	}
	fail := func(err error) (*Child, error) {
		c.Release()
		return nil, fmt.Errorf("prepare child: %w", err)
	}
	if t.mapIDs {
		if err := c.mapIDs(); err != nil {
			return fail(err)
		}
	}
	killed, stopWatch := c.killPendingAt(clock.OrReal(spec.Clock), killBy, "is not ready", cancel)
	var st initStatus
	err = readInitStatus(c.status, &st, false)
	close(stopWatch)
	switch {
	case killed.Load() && isClosed(cancel):
		return fail(errPrepareCancelled)
	case killed.Load():
		return fail(errInitSlow)
	case st.ready:
		return c, nil
	case st.failed != "":
		return fail(errors.New(st.failed))
	default:
		return fail(fmt.Errorf("%w: %w", errInitGone, err))
	}
}

// Begin tells a prepared init to start the command, with spec's Env, and
// under spec's StartBy, KillBy, StopSignal, StopTimeout and Clock (the rest
// of spec is PrepareChild's), and returns once it runs, as StartChild. A
// Child is begun at most once. If the init had ended before it could be
// sent the go message, the error is errInitGone, and a start with a new
// init is safe: nothing of this one is left, and its command never ran.
// An init that ends once it was sent the go message may have exec'd the
// command first (it reports it started only after the exec): that error
// is errInitLost.
func (c *Child) Begin(spec ChildSpec) error {
	c.spec.Env, c.spec.StartBy, c.spec.KillBy = spec.Env, spec.StartBy, spec.KillBy
	c.spec.StopSignal, c.spec.StopTimeout, c.spec.Clock = spec.StopSignal, spec.StopTimeout, spec.Clock
	env := spec.Env
	if env == nil {
		env = []string{}
	}
	clk := clock.OrReal(spec.Clock)
	c.suspended = clk.Suspended()
	c.marker = treeMarker(env)
	c.started = time.Now()
	killed, stopWatch := c.killPendingAt(clk, spec.KillBy, "is still starting the command at ValidUntil − StopMargin", nil)
	_, err := c.ctl.Write(nsinit.Go(monotonicBy(clk, spec.StartBy), env))
	if err != nil {
		err = fmt.Errorf("%w: send the go message: %w", errInitGone, err)
	} else {
		c.goSent.Store(true)
		err = c.awaitInit()
	}
	close(stopWatch)
	if killed.Load() {
		err = fmt.Errorf("%w: still starting at ValidUntil − StopMargin; killed", errStartLate)
	}
	c.begun = true
	close(c.initSeen) // the waiter may read the rest of the status pipe now
	if err != nil {
		c.reaped()
		return fmt.Errorf("start child: %w", err)
	}
	_, err = c.running(clk)
	return err
}

// Release ends a prepared init that was not begun, and returns once it is
// reaped; its namespace never held anything else.
func (c *Child) Release() {
	c.tree.kill(c, syscall.SIGKILL)
	close(c.initSeen)
	c.reaped()
}

// reaped waits until the init of a start that did not happen is reaped
// (its waiter may go on: initSeen is closed), then closes electd's ends of
// its output and init pipes.
func (c *Child) reaped() {
	<-c.done
	c.closeOutputs()
	c.closeInitPipes()
}

// mapIDs writes the id maps of the init's user namespace and then lets the
// init go on (see initArg0Userns).
func (c *Child) mapIDs() error {
	if err := writeIDMaps(c.pid); err != nil {
		return err
	}
	if _, err := c.ctl.Write([]byte{0}); err != nil {
		return fmt.Errorf("let the namespace init go on: %w", err)
	}
	return nil
}

// initPipes adds the namespace init's control and status pipes to attr as
// fds 3 and 4; the returned list adds the ends only the init keeps.
func (c *Child) initPipes(attr *os.ProcAttr, closeAfterStart []*os.File) ([]*os.File, error) {
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return closeAfterStart, err
	}
	statR, statW, err := os.Pipe()
	if err != nil {
		ctlR.Close()
		ctlW.Close()
		return closeAfterStart, err
	}
	c.ctl, c.statR, c.status = ctlW, statR, bufio.NewReader(statR)
	c.initSeen = make(chan struct{})
	attr.Files = append(attr.Files, ctlR, statW)
	return append(closeAfterStart, ctlR, statW), nil
}

// killPendingAt SIGKILLs the namespace init (and so its namespace) if it
// is still pending (what: how) at killBy on clk, or once cancel (if not
// nil) is closed; killed reports that it did. Closing stop disarms it. A
// zero killBy arms no timer.
func (c *Child) killPendingAt(clk clock.Clock, killBy time.Time, what string, cancel <-chan struct{}) (killed *atomic.Bool, stop chan struct{}) {
	killed, stop = new(atomic.Bool), make(chan struct{})
	if killBy.IsZero() && cancel == nil {
		return killed, stop
	}
	var (
		t    clock.Timer
		fire <-chan time.Time
	)
	if !killBy.IsZero() {
		t = clk.NewBootTimer(max(0, killBy.Sub(clk.Now())))
		fire = t.C()
	}
	go func() {
		if t != nil {
			defer t.Stop()
		}
		select {
		case <-fire:
		case <-cancel:
		case <-stop:
			return
		}
		select {
		case <-stop:
		case <-c.done:
		default:
			killed.Store(true)
			if isClosed(cancel) {
				c.log.Debug("the namespace init is not ready as its preparation is given up; killing it", "pid", c.pid)
			} else {
				c.log.Warn("the namespace init "+what+"; killing it", "pid", c.pid)
			}
			c.tree.kill(c, syscall.SIGKILL)
		}
	}()
	return killed, stop
}

// awaitInit reads the init's status line after the go message: the
// command runs, or why it could not be started (then the init has exited,
// and is reaped).
func (c *Child) awaitInit() error {
	var st initStatus
	err := readInitStatus(c.status, &st, false)
	switch {
	case st.started:
		return nil
	case st.late:
		return fmt.Errorf("%w (the namespace init: %s)", errStartLate, st.failed)
	case st.failed != "":
		return errors.New(st.failed)
	default:
		return fmt.Errorf("%w: %w", errInitLost, err)
	}
}

// isClosed reports whether ch (nil: never) is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// nsTree is the pidns and userns modes: the child runs in a PID namespace
// of its own under a namespace init of electd's (nsinit.go), and its tree
// is that namespace.
type nsTree struct {
	label Containment // ContainPidns or ContainUserns
	// arg0 is the init's argv[0], which tells it its mode; mapIDs: the
	// init waits for the id maps of its user namespace (userns).
	arg0   string
	mapIDs bool
	// trusted: the init's word that its namespace is empty is taken (see
	// trustsEmpty).
	trusted bool
}

func (t nsTree) mode() Containment { return t.label }

// trustsEmpty reports whether the init's word that its namespace is empty
// may end the child before the init is reaped. Its status pipe is its fd 4,
// which a process that may ptrace the init can open through /proc and write
// a line of its own into. Under pidns the init is not dumpable (nsinit) and
// the tree runs with electd's credentials: only a tree that is root on the
// host (which may as well write electd's own memory through /proc) can, and
// its honesty is assumed, as everywhere. Under userns the tree is root in
// the init's user namespace, with CAP_SYS_PTRACE over the init, though it
// can do nothing to electd: there the word is not taken, and the child
// ends once the init is reaped (TestForgedEmptyLine).
func (t nsTree) trustsEmpty() bool { return t.trusted }

// start prepares the init and begins it at once.
func (t nsTree) start(spec ChildSpec, log *slog.Logger) (*Child, error) {
	c, err := t.prepare(spec, log, spec.KillBy, nil)
	if errors.Is(err, errInitSlow) {
		err = fmt.Errorf("%w: %w", errStartLate, err)
	}
	if err != nil {
		return nil, fmt.Errorf("start child: %w", err)
	}
	if err := c.Begin(spec); err != nil {
		return nil, err
	}
	return c, nil
}

// signal sends sig to the command's process group through the init's
// control pipe (the init forwards no signal sent to it; see nsinit), and
// only once Begin has sent the go message.
func (nsTree) signal(c *Child, sig syscall.Signal) error {
	if !c.goSent.Load() {
		return fmt.Errorf("signal child %d: the command was not started", c.pid)
	}
	if sig < 1 || sig > 64 {
		return fmt.Errorf("signal child %d: no signal %d", c.pid, sig)
	}
	switch err := c.tryCtl(nsinit.Forward(sig)); {
	case errors.Is(err, syscall.EAGAIN):
		return fmt.Errorf("signal child %d: the namespace init does not read its control pipe (stopped?); %s dropped", c.pid, signalName(sig))
	case err != nil:
		return fmt.Errorf("signal child %d: %w (the namespace init is gone: %w)", c.pid, os.ErrProcessDone, err)
	}
	c.log.Debug("signaled", "pid", c.pid, "signal", signalName(sig), "through", "the namespace init")
	return nil
}

// signalTree has the init send sig to its whole namespace; SIGKILL goes to
// the init itself, whose death kills the namespace.
func (t nsTree) signalTree(c *Child, sig syscall.Signal) {
	if sig == syscall.SIGKILL {
		t.kill(c, sig)
		return
	}
	if err := c.tryCtl(byte(sig)); err != nil {
		c.log.Warn("send stop signal to the namespace init failed; killing it", "pid", c.pid, "err", err)
		t.kill(c, syscall.SIGKILL)
	}
}

// kill signals the init itself, through its pidfd: the init's group holds
// only the init (the command leads a group of its own, and the init's
// death takes the whole namespace), and its waiter may have reaped it
// already (a prepared init reaped long before its Release), and then its
// pid, the group's id, may be a stranger's.
func (nsTree) kill(c *Child, sig syscall.Signal) {
	if err := c.proc.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		c.log.Warn("signal the namespace init failed", "pid", c.pid, "signal", signalName(sig), "err", err)
	}
}

// awaitMain: the kernel kills and reaps the whole namespace with the init,
// so there is nothing to sweep while waiting.
func (nsTree) awaitMain(*Child) {}

// sweep: nothing is left of the tree once the init is reaped.
func (nsTree) sweep(*Child) error { return nil }
