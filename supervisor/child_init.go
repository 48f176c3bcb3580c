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

// PrepareChild forks the namespace init for spec's command (spec's mode
// must be pidns or userns) and returns once it is ready for Begin. An init
// not ready by killBy (on spec.Clock) is killed, and the error is
// errInitSlow; a zero killBy waits as long as it takes. Of spec it uses
// only the command (Path, Args, Shell), Dir, Stdout, Stderr and
// Containment; Begin gives the rest.
func PrepareChild(spec ChildSpec, log *slog.Logger, killBy time.Time) (*Child, error) {
	return prepareChild(spec, log, killBy, nil)
}

// errPrepareCancelled: the preparation was given up (cancel was closed)
// before the init was ready, and the init was killed.
var errPrepareCancelled = errors.New("the namespace init's preparation was given up; killed")

// prepareChild is PrepareChild, given up (the init killed) once cancel is
// closed.
func prepareChild(spec ChildSpec, log *slog.Logger, killBy time.Time, cancel <-chan struct{}) (*Child, error) {
	if spec.mode() == ContainPgroup {
		return nil, errors.New("prepare child: only the pidns and userns modes have a namespace init")
	}
	c, fa, err := newChild(spec, log)
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
	nsAttr(fa.attr.Sys, c.mode())
	fa.argv = append([]string{c.initArg0(), fa.path}, fa.argv...)
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
	if c.mode() == ContainUserns {
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
	c.killGroup(syscall.SIGKILL)
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

// tryCtl writes b on the init's control pipe without waiting: a pipe that
// is full (an init that does not read it: stopped, or hung) is EAGAIN, so
// that neither a stop nor a forwarded signal ever blocks electd.
func (c *Child) tryCtl(b byte) error {
	rc, err := c.ctl.SyscallConn()
	if err != nil {
		return err
	}
	var werr error
	if err := rc.Write(func(fd uintptr) bool {
		for {
			_, werr = syscall.Write(int(fd), []byte{b})
			if !errors.Is(werr, syscall.EINTR) {
				return true // done, or an error of its own: never wait
			}
		}
	}); err != nil {
		return err
	}
	return werr
}

// initArg0 is the namespace init's argv[0], which tells it its mode.
func (c *Child) initArg0() string {
	if c.mode() == ContainUserns {
		return initArg0Userns
	}
	return initArg0
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

// closeInitPipes closes electd's ends of the init's pipes, once; without
// a namespace init there are none.
func (c *Child) closeInitPipes() {
	c.pipesOnce.Do(func() {
		if c.ctl != nil {
			c.ctl.Close()
			c.statR.Close()
		}
	})
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
			c.killGroup(syscall.SIGKILL)
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
