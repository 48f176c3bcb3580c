package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Reaping design.
//
// As PID 1 or as a child subreaper, electd inherits every orphaned
// descendant and must reap it, or it stays a zombie. The classic way,
// wait4(-1) on SIGCHLD, races with the goroutine that waits for a child
// started by StartChild: whichever calls first gets the exit status, and a
// stolen status would make electd report a wrong exit code (and os.Process
// would fail with ECHILD).
//
// So the orphan reaper never calls wait4(-1). Instead:
//
//   - StartChild records the pid of each child it forks in owned, and drops it
//     only after its own waiter has reaped it. The fork and the recording
//     happen under reaperMu, so a child can never be seen without its mark,
//     however fast it exits.
//   - The reaper, holding reaperMu, lists our children (from
//     /proc/self/task/*/children, or by scanning /proc for our ppid where the
//     kernel lacks that file) and calls wait4(pid, WNOHANG) on each pid that is
//     not owned. Pids that have not exited are left alone; owned pids are
//     never touched, so the waiters in StartChild always get their own status.
//
// This keeps the ordinary os.Process.Wait (pidfd based) for our children
// instead of routing every status through one central wait loop. The
// reaper looks when it starts, on every SIGCHLD, and after every reaping
// done elsewhere (reapedElsewhere), and on nothing else:
//
//   - No SIGCHLD is lost: one comes for every child that exits, and for
//     every orphan that was already a zombie when it was reparented to
//     electd (the kernel resets a reparented orphan's exit signal to
//     SIGCHLD). They coalesce, but one that comes during a pass leaves a
//     token that starts another, which looks at every child.
//   - A pass may not see every child, though: the kernel builds
//     /proc/PID/task/TID/children by index, one read(2) at a time, so a
//     child that someone else reaps between two reads (a StartChild
//     waiter, Stop's reapGroup, the containment probe: they do not hold
//     reaperMu) hides the one after it from that pass. Its SIGCHLD may
//     have been spent on that very pass. So each of them, once it has
//     reaped, has the reaper look again (nudgeReaper): the last pass
//     begins after the last reaping done elsewhere, and a pass that no
//     such reaping overlaps sees every child.
//
// The one limit: children that other code in this process starts by other means
// (os/exec) are not marked, and an unmarked child that has exited is
// reaped here; so while ReapOrphans runs, start children only with
// StartChild. Stop separately reaps the leftovers of a child's own process
// group with wait4(-pgid), which is safe for the same reason.
var (
	reaperMu sync.Mutex
	owned    = map[int]struct{}{}
)

// startOwned forks the process and marks it owned, atomically with respect
// to the orphan reaper.
func startOwned(path string, argv []string, attr *os.ProcAttr) (*os.Process, error) {
	reaperMu.Lock()
	defer reaperMu.Unlock()
	p, err := os.StartProcess(path, argv, attr)
	if err != nil {
		return nil, err
	}
	owned[p.Pid] = struct{}{}
	return p, nil
}

// ownedLocked reports whether pid is a child that StartChild forked and has
// not reaped yet; the caller holds reaperMu.
func ownedLocked(pid int) bool {
	_, ok := owned[pid]
	return ok
}

// disown drops the mark of a child that its waiter has reaped.
func disown(pid int) {
	reaperMu.Lock()
	delete(owned, pid)
	reaperMu.Unlock()
	nudgeReaper()
}

// BecomeSubreaper makes electd a child subreaper (PR_SET_CHILD_SUBREAPER):
// orphaned descendants, such as grandchildren whose parent (the child)
// exited, are reparented to electd instead of to PID 1, so Stop can reap
// them and ReapOrphans must run to reap the rest.
func BecomeSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("become child subreaper: %w", err)
	}
	return nil
}

// isSubreaper reports whether this process is a child subreaper.
func isSubreaper() (bool, error) {
	v := new(int32)
	if _, _, errno := syscall.Syscall(syscall.SYS_PRCTL, unix.PR_GET_CHILD_SUBREAPER,
		uintptr(unsafe.Pointer(v)), 0); errno != 0 {
		return false, fmt.Errorf("get child subreaper: %w", errno)
	}
	return *v != 0, nil
}

// ReapOrphans reaps orphaned descendants that were reparented to electd,
// until ctx ends. It acts only when electd is PID 1 or a child subreaper
// (call BecomeSubreaper first); otherwise orphans go to another reaper and
// it returns at once. It never takes the exit status of a child started by
// StartChild (see the reaping design above), and it never calls
// wait4(-1). It looks when it starts, on every SIGCHLD, and after each
// reaping done elsewhere in this package (see the reaping design).
func ReapOrphans(ctx context.Context, log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.WithGroup("child")
	if os.Getpid() != 1 {
		sub, err := isSubreaper()
		if err != nil || !sub {
			log.Debug("neither PID 1 nor a child subreaper; not reaping orphans", "err", err)
			return
		}
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	defer signal.Stop(sigs)
	for {
		reapUnowned(log, 0)
		select {
		case <-ctx.Done():
			return
		case <-sigs:
		case <-reapedElsewhere:
		}
	}
}

// reapedElsewhere holds a token when a child of electd was reaped outside
// ReapOrphans since its last pass began (see the reaping design).
var reapedElsewhere = make(chan struct{}, 1)

// nudgeReaper has ReapOrphans look again, after a reaping of its own by
// code that does not hold reaperMu.
func nudgeReaper() {
	select {
	case reapedElsewhere <- struct{}{}:
	default: // a pass is due already
	}
}

// reapUnowned reaps every exited child that StartChild does not own and
// that started at or after since (clock ticks after boot; 0: any). Stop
// passes its child's start, so that it reaps only members of that child's
// tree reparented to electd, not children that other code of this process
// started earlier and waits for itself.
func reapUnowned(log *slog.Logger, since uint64) {
	reaperMu.Lock()
	defer reaperMu.Unlock()
	pids, err := childPids()
	if err != nil {
		log.Warn("list children failed", "err", err)
		return
	}
	for _, pid := range pids {
		if _, ok := owned[pid]; ok || (since > 0 && startTime(pid) < since) {
			continue
		}
		for {
			var ws unix.WaitStatus
			got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err == nil && got == pid {
				log.Debug("reaped orphan", "pid", pid, "code", exitCodeOf(ws))
			}
			break
		}
	}
}

func exitCodeOf(ws unix.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
