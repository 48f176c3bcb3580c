package supervisor

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"syscall"
	"time"

	"github.com/electd/electd/clock"
)

// The containment mode of a child is chosen once, by treeOf, when the
// child is made: its tree (the interface in child.go) is groupTree under
// pgroup (this file) or nsTree under pidns and userns (child_init.go), and
// everything that differs between the modes is a method of it. Nothing
// else looks at the mode.

// treeOf is the tree of spec's containment mode: pidns and userns put the
// child under a namespace init, anything else (pgroup; ContainNone and auto
// never reach a child) in a process group of its own.
func treeOf(spec ChildSpec) tree {
	switch spec.Containment {
	case ContainPidns:
		return nsTree{label: ContainPidns, arg0: initArg0, trusted: true}
	case ContainUserns:
		return nsTree{label: ContainUserns, arg0: initArg0Userns, mapIDs: true}
	}
	return groupTree{}
}

// StartChild starts spec in a new process group (ContainPgroup) or PID
// namespace (ContainPidns; ContainUserns: one owned by a new user
// namespace) and returns once it runs; Done tells when the
// child has exited. log may be nil; records go under the group "child".
// Under pidns and userns it is PrepareChild and then Begin.
//
// The child (under pidns: the namespace init) gets Pdeathsig = SIGKILL, so it dies when electd dies, even by
// kill -9. The kernel delivers the parent-death signal when the *thread*
// that forked the child exits, not the process, and the Go runtime may
// retire threads. So the child is forked from a goroutine that has called
// runtime.LockOSThread; that goroutine then stays on its thread, blocked in
// wait for the child, and unlocks only after the child has been reaped. The
// thread therefore lives exactly as long as the child does. (Pdeathsig
// reaches only the direct child, not its descendants.)
//
// The child starts with the default action for every signal, even those
// electd inherited as ignored (see defaultDispositions), and with stdin on
// /dev/null.
func StartChild(spec ChildSpec, log *slog.Logger) (*Child, error) {
	return treeOf(spec).start(spec, log)
}

// PrepareChild forks the namespace init for spec's command (spec's mode
// must be pidns or userns) and returns once it is ready for Begin. An init
// not ready by killBy (on spec.Clock) is killed, and the error is
// errInitSlow; a zero killBy waits as long as it takes. Of spec it uses
// only the command (Path, Args, Shell), Dir, Stdout, Stderr and
// Containment; Begin gives the rest.
func PrepareChild(spec ChildSpec, log *slog.Logger, killBy time.Time) (*Child, error) {
	return prepareChild(spec, log, killBy, nil)
}

// prepareChild is PrepareChild, given up (the init killed) once cancel is
// closed.
func prepareChild(spec ChildSpec, log *slog.Logger, killBy time.Time, cancel <-chan struct{}) (*Child, error) {
	return treeOf(spec).prepare(spec, log, killBy, cancel)
}

// groupTree is the pgroup mode: the child leads a process group of its
// own, and its tree is what Stop finds of it in /proc (see treeMembers).
type groupTree struct{}

func (groupTree) mode() Containment { return ContainPgroup }

func (groupTree) trustsEmpty() bool { return false }

// start forks the command itself, in a group of its own.
func (t groupTree) start(spec ChildSpec, log *slog.Logger) (*Child, error) {
	c, fa, err := newChild(spec, log, t)
	if err != nil {
		return nil, fmt.Errorf("start child: %w", err)
	}
	env := spec.Env
	if env == nil {
		env = []string{}
	}
	fa.attr.Env = env
	clk := clock.OrReal(spec.Clock)
	c.suspended = clk.Suspended()
	if err := c.fork(fa, monotonicBy(clk, spec.StartBy)); err != nil {
		c.closeOutputs()
		return nil, fmt.Errorf("start child: %w", err)
	}
	c.marker = treeMarker(env)
	return c.running(clk)
}

// prepare: there is nothing to prepare without a namespace init.
func (groupTree) prepare(ChildSpec, *slog.Logger, time.Time, <-chan struct{}) (*Child, error) {
	return nil, fmt.Errorf("prepare child: %w", errNoInit)
}

// errNoInit: PrepareChild under pgroup.
var errNoInit = errors.New("only the pidns and userns modes have a namespace init")

// signal sends sig to the command's process group with kill(2).
func (groupTree) signal(c *Child, sig syscall.Signal) error {
	if err := syscall.Kill(-c.pid, sig); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("signal child %d: %w", c.pid, os.ErrProcessDone)
		}
		return fmt.Errorf("signal child %d: %w", c.pid, err)
	}
	c.log.Debug("signaled", "pid", c.pid, "signal", signalName(sig))
	return nil
}

// signalTree sends sig to the group and to every process of the tree that
// treeMembers finds; SIGCONT follows a stop signal so that stopped
// processes act on it.
func (t groupTree) signalTree(c *Child, sig syscall.Signal) {
	sigs := []syscall.Signal{sig}
	if sig != syscall.SIGCONT && sig != syscall.SIGKILL {
		sigs = append(sigs, syscall.SIGCONT)
	}
	for _, s := range sigs {
		t.kill(c, s)
		_, _, _ = c.signalMembers(s) // a failed listing is logged; the next pass lists again
	}
}

// kill sends sig to the child's process group; a group that is already
// empty is not an error.
func (groupTree) kill(c *Child, sig syscall.Signal) {
	if c.groupGone.Load() {
		return // its id may be a stranger's by now
	}
	if err := syscall.Kill(-c.pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		c.log.Warn("signal process group failed", "pid", c.pid, "signal", signalName(sig), "err", err)
	}
}

// awaitMain waits for the SIGKILLed main process to be reaped, and the
// sweep goes on meanwhile, every mainSweep: a main process that does not
// die at once (uninterruptible sleep) must not leave the rest of its tree
// unswept, where a process that keeps starting a successor and exiting
// slipped the first sweep.
func (t groupTree) awaitMain(c *Child) {
	tick := time.NewTicker(mainSweep)
	defer tick.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-tick.C:
			t.signalTree(c, syscall.SIGKILL)
		}
	}
}

// mainSweep is how often the tree is swept again while the SIGKILLed main
// process is not yet reaped.
const mainSweep = 100 * time.Millisecond

// sweep kills what is left of the tree once the child is reaped (see
// drainGroup).
func (groupTree) sweep(c *Child) error { return c.drainGroup() }
