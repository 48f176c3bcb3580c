package supervisor

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// Processes beside the child.
//
// electd starts a few processes that are not the child's (the --on-change
// hooks). Each is in a session and process group of its own, so that it can be ended
// with its descendants, and none of them may be taken for the child's
// tree: under pgroup containment electd is a subreaper, and an orphan
// reparented to it that started after the child counts as the child's
// (see treeMembers). So StartAside marks its process owned (the orphan
// reaper leaves it to its waiter) and its group aside (the tree's sweep
// skips every process of that group), atomically with the fork, and
// EndAside, once the process is reaped, kills what is left of its group
// and drops both marks.
var aside = map[int]struct{}{} // process groups, under reaperMu

// StartAside starts path with argv and attr in a session and process group
// of its own (attr.Sys's Setsid is set), beside the child's tree: its group is never
// signalled, counted or awaited as the child's. The caller waits for the
// process (p.Wait) and then calls EndAside.
func StartAside(path string, argv []string, attr *os.ProcAttr) (*os.Process, error) {
	if attr.Sys == nil {
		attr.Sys = &syscall.SysProcAttr{}
	}
	// A session of its own, not only a group: a process may join a group
	// of its own session only, and under pgroup containment the child's
	// tree shares electd's session. A tree process that joined a hook's
	// group would be spared by the tree's sweep and outlive its term, and
	// the stop would signal the hook's group with the tree's.
	attr.Sys.Setsid, attr.Sys.Setpgid, attr.Sys.Setctty = true, false, false
	reaperMu.Lock()
	defer reaperMu.Unlock()
	p, err := os.StartProcess(path, argv, attr)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	owned[p.Pid] = struct{}{}
	aside[p.Pid] = struct{}{}
	return p, nil
}

// KillAside sends SIGKILL to the process group of a process that
// StartAside started (its pid is the group's id).
func KillAside(pid int) error {
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill process group %d: %w", pid, err)
	}
	return nil
}

// EndAside, once the process pid that StartAside started has been reaped,
// SIGKILLs what is left of its process group (background jobs it did not
// wait for) and forgets it. The kernel keeps a group's id from reuse while
// any member lives, so the id names no stranger here.
func EndAside(pid int) error {
	err := KillAside(pid)
	reaperMu.Lock()
	delete(owned, pid)
	delete(aside, pid)
	reaperMu.Unlock()
	nudgeReaper() // the group's members, orphaned to electd, are its to reap
	return err
}

// asideLocked reports whether pgid is the group of a process started by
// StartAside; the caller holds reaperMu.
func asideLocked(pgid int) bool {
	_, ok := aside[pgid]
	return ok
}
