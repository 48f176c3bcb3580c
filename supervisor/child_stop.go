package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// groupDrainTimeout bounds how long Stop waits, after the child itself
	// was reaped, for the rest of its process group to disappear.
	groupDrainTimeout = 5 * time.Second
	// outputDrainTimeout bounds how long Stop waits for output still in the
	// pipes once the group is gone (a process outside the group, e.g. a
	// daemon that called setsid, may hold a pipe open forever).
	outputDrainTimeout = time.Second
)

// Stop ends the child and its whole process group:
//
//  1. StopSignal to the group (then SIGCONT, as systemd does, so that
//     stopped members can act on it),
//  2. wait up to StopTimeout for the child to exit,
//  3. SIGKILL to the group if it has not,
//  4. wait until the child is reaped,
//  5. SIGKILL whatever is left of the group (grandchildren) and wait, at
//     most 5 s, until kill(-pgid) reports ESRCH (no member left), reaping
//     the members that were reparented to electd (subreaper or PID 1);
//     zombies whose parent is someone else do not count as alive,
//  6. wait (bounded) until the child's output has been delivered.
//
// ctx bounds only the grace period of step 2: once it ends, SIGKILL follows
// at once, and steps 3-6 always run, so Stop never returns while the child
// still runs. Stop is idempotent and safe for concurrent use: every call
// waits for the same single stop and returns the same result; a caller whose
// ctx ends cuts the grace period short for all. If the child has already
// exited, Stop only cleans up its group and output. The error is non-nil
// only if live group members survived SIGKILL past the bound.
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
		c.log.Info("stopping", "pid", c.pid, "signal", signalName(sig), "timeout", timeout)
		c.killGroup(sig)
		if sig != syscall.SIGCONT && sig != syscall.SIGKILL {
			c.killGroup(syscall.SIGCONT)
		}
		if !c.grace(ctx, timeout) {
			// Set before the kill so that the waiter, which reads it after
			// reaping, sees it if our SIGKILL is what ended the child.
			c.escalated.Store(true)
			c.log.Warn("stop timeout elapsed or cut short; killing process group",
				"pid", c.pid, "signal", "SIGKILL", "timeout", timeout)
			c.killGroup(syscall.SIGKILL)
		}
	}
	<-c.done
	err := c.drainGroup()
	c.drainOutput()
	return err
}

// grace waits up to timeout for the child to exit and reports whether it did.
func (c *Child) grace(ctx context.Context, timeout time.Duration) bool {
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		select {
		case <-c.done:
			return true
		case <-t.C:
		case <-ctx.Done():
		case <-c.killNow:
		}
	}
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// killGroup sends sig to the child's process group; a group that is already
// empty is not an error.
func (c *Child) killGroup(sig syscall.Signal) {
	if err := syscall.Kill(-c.pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		c.log.Warn("signal process group failed", "pid", c.pid, "signal", signalName(sig), "err", err)
	}
}

// drainGroup runs after the child (the group leader) was reaped. It kills
// the group's remaining members and waits until none is left.
//
// The group id cannot be recycled while any member lives (the kernel keeps a
// pid allocated while it is still in use as a process group id), so these
// kills reach only our own leftovers; only an already empty group's id could
// have been reused, in the moment between reaping and this call.
func (c *Child) drainGroup() error {
	deadline := time.Now().Add(groupDrainTimeout)
	delay := time.Millisecond
	for {
		// Members reparented to us (as subreaper or PID 1) stay zombies in
		// the group until we reap them. With the leader already reaped, every
		// child of ours in this group is such an orphan, so wait4(-pgid)
		// cannot take a status that anybody else waits for.
		reapGroup(c.pid, c.log)
		err := syscall.Kill(-c.pid, syscall.SIGKILL)
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		if time.Now().After(deadline) {
			alive, zombies := groupMembers(c.pid)
			if alive == 0 {
				c.log.Warn("process group left only zombies that their parent does not reap",
					"pid", c.pid, "zombies", zombies)
				return nil
			}
			return fmt.Errorf("stop child %d: %d processes of its group still alive %s after SIGKILL",
				c.pid, alive, groupDrainTimeout)
		}
		time.Sleep(delay)
		delay = min(2*delay, 50*time.Millisecond)
	}
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

// reapGroup reaps every exited child of ours whose process group is pgid.
func reapGroup(pgid int, log *slog.Logger) {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-pgid, &ws, unix.WNOHANG, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		log.Debug("reaped group member", "pid", pid, "code", exitCodeOf(ws))
	}
}

// groupMembers counts, from /proc, the processes whose process group is
// pgid, split into live ones and zombies.
func groupMembers(pgid int) (alive, zombies int) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 1, 0 // cannot tell: assume the worst
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readStat(pid)
		if err != nil || st.pgrp != pgid {
			continue
		}
		if st.state == 'Z' || st.state == 'X' {
			zombies++
		} else {
			alive++
		}
	}
	return alive, zombies
}

type procStat struct {
	state      byte
	ppid, pgrp int
}

// readStat parses /proc/<pid>/stat: "pid (comm) state ppid pgrp ...", where
// comm may itself contain spaces and parentheses.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("parse /proc/%d/stat: no comm", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 3 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("parse /proc/%d/stat: short", pid)
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgrp, err2 := strconv.Atoi(f[2])
	if err := errors.Join(err1, err2); err != nil {
		return procStat{}, fmt.Errorf("parse /proc/%d/stat: %w", pid, err)
	}
	return procStat{state: f[0][0], ppid: ppid, pgrp: pgrp}, nil
}

func exitCodeOf(ws unix.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
