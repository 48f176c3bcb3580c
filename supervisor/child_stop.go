package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/electd/electd/clock"
)

const (
	// groupDrainTimeout bounds how long Stop waits, after the child itself
	// was reaped, for the rest of its process group to disappear.
	groupDrainTimeout = 5 * time.Second
	// outputDrainTimeout bounds how long Stop waits for output still in the
	// pipes once the group is gone (a process outside the group, e.g. a
	// daemon that called setsid, may hold a pipe open forever).
	outputDrainTimeout = time.Second
	// suspendPoll is how often the stop grace looks for a suspension.
	suspendPoll = SuspendBound
	// emptyScanPause separates the two empty scans that end the sweep under
	// the mark rule (see drained).
	emptyScanPause = 10 * time.Millisecond
)

// Stop ends the child and its whole process tree (see Containment):
//
//  1. StopSignal to every process of the tree (then SIGCONT, as systemd
//     does, so that stopped members can act on it): under pgroup to the group
//     and to every descendant found in /proc, under pidns and userns to every process of
//     the namespace, through its init;
//  2. wait up to StopTimeout for the child (its main process) to exit,
//  3. SIGKILL to the tree if it has not,
//  4. wait until the child is reaped (under pidns and userns the kernel has then killed
//     and reaped the whole namespace, or the init reported it empty: see
//     Done),
//  5. under pgroup, SIGKILL whatever is left of the tree (workers, setsid'd
//     daemons reparented to electd) and wait, at most 5 s, until none is
//     left alive, reaping those reparented to electd; zombies whose parent
//     is someone else do not count as alive,
//  6. wait (bounded) until the child's output has been delivered.
//
// ctx bounds only the grace period of step 2: once it ends, SIGKILL follows
// at once (a ctx already ended skips steps 1 and 2), and steps 3-6 always
// run, so Stop never returns while the tree still runs. Stop is idempotent and safe for concurrent use: every call
// waits for the same single stop and returns the same result; a caller whose
// ctx ends cuts the grace period short for all. If the child has already
// exited, Stop only kills and reaps what is left of its tree and drains its
// output. The error is non-nil only if live members survived SIGKILL past
// the bound.
func (c *Child) Stop(ctx context.Context) (ExitStatus, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	first := false
	c.stopOnce.Do(func() { first = true })
	if first {
		c.stopErr = c.stop(ctx)
		close(c.stopDone)
	} else {
		select {
		case <-c.stopDone:
		case <-ctx.Done():
			c.skipGrace()
			<-c.stopDone
		}
	}
	return c.exit, c.stopErr
}

func (c *Child) skipGrace() { c.killOnce.Do(func() { close(c.killNow) }) }

func (c *Child) stop(ctx context.Context) error {
	select {
	case <-c.done:
		// Exited on its own: only what is left of its group remains.
	default:
		sig := c.spec.stopSignal()
		timeout := max(c.spec.StopTimeout, 0)
		if ctx.Err() != nil {
			// No time left for a grace period: a stop signal now would only
			// race the SIGKILL.
			sig = syscall.SIGKILL
		}
		c.log.Info("stopping", "pid", c.pid, "signal", signalName(sig), "timeout", timeout)
		if sig != syscall.SIGKILL {
			c.tree.signalTree(c, sig)
		}
		if sig == syscall.SIGKILL || !c.grace(ctx, timeout) {
			// Set before the kill so that the waiter, which reads it after
			// reaping, sees it if our SIGKILL is what ended the child.
			c.escalated.Store(true)
			c.log.Warn("stop timeout elapsed or cut short; killing the process tree",
				"pid", c.pid, "signal", "SIGKILL", "timeout", timeout)
			c.tree.signalTree(c, syscall.SIGKILL)
			c.tree.awaitMain(c)
		}
	}
	<-c.done
	err := c.tree.sweep(c)
	c.drainOutput()
	return err
}

// signalMembers sends sig to the processes of the child's tree that
// treeMembers finds (other than the leader, whose group groupTree.kill signals),
// and to their process groups, and returns how many live processes it
// found, and how many zombies of electd's own (treeMembers' lingering); an
// error (/proc could not be listed) says nothing is known.
func (c *Child) signalMembers(sig syscall.Signal) (alive, lingering int, err error) {
	pids, groups, lingering, err := treeMembers(c.pid, c.ticks, c.marker, c.groupGone.Load())
	if err != nil {
		c.log.Warn("list the processes of the tree failed", "pid", c.pid, "err", err)
		return 0, 0, err
	}
	for _, g := range groups {
		if err := syscall.Kill(-g, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			c.log.Warn("signal a process group of the tree failed", "pgid", g, "signal", signalName(sig), "err", err)
		}
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			c.log.Warn("signal tree member failed", "pid", pid, "signal", signalName(sig), "err", err)
		}
	}
	return len(pids), lingering, nil
}

// grace waits up to timeout for the child to exit and reports whether it
// did. The timeout runs on the boot clock of spec.Clock, so a suspension
// of the host does not stretch it; and since the store's lease runs on
// while the host sleeps, once the host is seen to have been suspended for
// more than SuspendBound in all since the child started (looked at when
// the grace begins, every suspendPoll, and whenever it wakes), the grace
// ends at once: SIGKILL follows.
func (c *Child) grace(ctx context.Context, timeout time.Duration) bool {
	if timeout > 0 {
		clk := clock.OrReal(c.spec.Clock)
		t := clk.NewBootTimer(timeout)
		defer t.Stop()
		poll := clk.NewTimer(suspendPoll)
		defer func() { poll.Stop() }()
		for over := false; ; {
			if d := clk.Suspended() - c.suspended; d > SuspendBound {
				c.log.Error("the host was suspended while the child ran, so the lease may have lapsed; ending the stop grace, killing the process tree now",
					"pid", c.pid, "suspended", d.Round(time.Millisecond))
				break
			}
			if over {
				break
			}
			select {
			case <-c.done:
				return true
			case <-t.C():
				over = true
			case <-ctx.Done():
				over = true
			case <-c.killNow:
				over = true
			case <-poll.C():
				poll = clk.NewTimer(suspendPoll)
			}
		}
	}
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// drainGroup runs after the child (the group leader) was reaped. It kills
// the rest of its tree (the group's members, and the descendants that left
// the group and were reparented to electd) and waits until none is left, for
// at most groupDrainTimeout; the error says how many processes survived.
//
// The group id cannot be recycled while any member lives (the kernel keeps a
// pid allocated while it is still in use as a process group id), so these
// kills reach only our own leftovers; once the group is seen empty it is
// not signalled again (groupGone).
func (c *Child) drainGroup() error {
	deadline := time.Now().Add(groupDrainTimeout)
	delay := time.Millisecond
	for {
		gone, rest := c.drained()
		if gone {
			return nil
		}
		if time.Now().After(deadline) {
			alive, zombies := 0, 0
			if !c.groupGone.Load() {
				alive, zombies = groupMembers(c.pid)
			}
			alive += rest
			if alive == 0 && zombies > 0 {
				c.log.Warn("process group left only zombies that their parent does not reap",
					"pid", c.pid, "zombies", zombies)
				return nil
			}
			return fmt.Errorf("stop child %d: %d processes of its tree still alive %s after SIGKILL",
				c.pid, max(alive, 1), groupDrainTimeout)
		}
		time.Sleep(delay)
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// awaitGone sweeps what is left of the tree after Stop gave up on it
// (processes that survived SIGKILL) again every survivorPoll, until it is
// gone (true) or stop is closed (false).
func (c *Child) awaitGone(stop <-chan struct{}) bool {
	tick := time.NewTicker(survivorPoll)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return false
		case <-tick.C:
			if gone, _ := c.drained(); gone {
				return true
			}
		}
	}
}

// survivorPoll is how often the sweep runs again while processes of a tree
// survive SIGKILL.
const survivorPoll = time.Second

// drained makes one pass of the sweep and reports whether the tree is gone:
// two passes in a row found nothing. One empty scan is not proof: /proc is
// read a process at a time, so a daemon whose parent exits (and is reaped)
// during the scan was read as the child of a process that is gone when its
// parent is read, and is found nowhere. It was reparented to us when its
// parent exited, before its parent was reaped and so before the scan ended:
// the next scan reads it as ours, and finds it (an orphan of ours is not
// reaped while a scan runs, so a chain below it cannot break the same way).
// A scan that reads a zombie of ours is not empty either: it may have
// forked a successor after the listing (treeMembers' lingering).
// Back to back under the every-orphan rule, which reads nothing of a
// process that an exec changes; under the mark rule an environment reads
// empty in the middle of an exec, so the second scan waits emptyScanPause,
// for the exec to end (TestSweepFindsExecingDaemons). rest is how many
// processes the pass found alive.
func (c *Child) drained() (gone bool, rest int) {
	for i := range 2 {
		if i > 0 && orphanRule.strangers != "" {
			time.Sleep(emptyScanPause)
		}
		var empty bool
		if empty, rest = c.drainPass(); !empty {
			return false, rest
		}
	}
	return true, 0
}

// drainPass reaps what it may, SIGKILLs every process of the tree it finds
// and the child's group, and reports whether it found none, not even a
// zombie of electd's own that it has yet to reap (see treeMembers).
func (c *Child) drainPass() (empty bool, rest int) {
	if !c.groupGone.Load() && pidTaken(c.pid) {
		// The leader is reaped, so a process with its pid is another one:
		// the kernel frees a pid only once no group uses it as its id, so
		// the child's group is empty, and that id is now a stranger's.
		c.groupGone.Store(true)
	}
	// Members reparented to us (as subreaper or PID 1) stay zombies in the
	// group until we reap them. With the leader already reaped, every child
	// of ours in this group is such an orphan, so wait4(-pgid) cannot take a
	// status that anybody else waits for.
	if !c.groupGone.Load() {
		reapGroup(c.pid, c.log)
	}
	reapUnowned(c.log, c.ticks) // tree members reparented to electd
	rest, lingering, err := c.signalMembers(syscall.SIGKILL)
	groupEmpty := c.groupGone.Load()
	if !groupEmpty {
		if kerr := syscall.Kill(-c.pid, syscall.SIGKILL); errors.Is(kerr, syscall.ESRCH) {
			c.groupGone.Store(true)
			groupEmpty = true
		}
	}
	return err == nil && rest == 0 && lingering == 0 && groupEmpty, rest
}

// drainOutput waits, bounded, for the output copiers to deliver what is left
// in the pipes, then closes the pipes so that no copier outlives Stop.
func (c *Child) drainOutput() {
	if len(c.outputs) == 0 {
		return
	}
	t := time.NewTimer(outputDrainTimeout)
	defer t.Stop()
	expired := false
	for _, o := range c.outputs {
		if !expired {
			select {
			case <-o.done:
				continue
			case <-t.C:
				expired = true
			}
		}
		select {
		case <-o.done:
		default:
			c.log.Warn("output pipe still open after the process group ended; closing it", "pid", c.pid)
			o.r.Close()
			<-o.done
		}
	}
}

// reapGroup reaps every exited child of ours whose process group is pgid
// (and has the orphan reaper look again after, see the reaping design).
func reapGroup(pgid int, log *slog.Logger) {
	reaped := false
	defer func() {
		if reaped {
			nudgeReaper()
		}
	}()
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-pgid, &ws, unix.WNOHANG, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		reaped = true
		log.Debug("reaped group member", "pid", pid, "code", exitCodeOf(ws))
	}
}

// groupMembers counts, from /proc, the processes whose process group is
// pgid, split into live ones and zombies.
func groupMembers(pgid int) (alive, zombies int) {
	procs, err := listProcs()
	if err != nil {
		return 1, 0 // cannot tell: assume the worst
	}
	for pid, st := range procs {
		switch {
		case st.pgrp != pgid:
		case running(pid, st):
			alive++
		default:
			zombies++
		}
	}
	return alive, zombies
}

// running finishes a start: the command runs. Its output is fed on, and
// if it started only after KillBy its whole tree is killed and reaped.
func (c *Child) running(clk clock.Clock) (*Child, error) {
	for _, o := range c.outputs {
		go o.run()
	}
	if !c.spec.KillBy.IsZero() && !clk.Now().Before(c.spec.KillBy) {
		// Too late to run at all: the whole tree (it may have forked
		// already) is killed and reaped, as by a Stop whose time is up.
		now, cancel := context.WithCancel(context.Background())
		cancel()
		_, serr := c.Stop(now)
		return nil, fmt.Errorf("start child: %w: started only after ValidUntil − StopMargin; killed", errors.Join(errStartLate, serr))
	}
	c.log.Info("started", "pid", c.pid, "path", c.path, "args", c.argv[1:], "containment", c.tree.mode())
	return c, nil
}
