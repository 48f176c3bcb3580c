package supervisor

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// startHookLike starts, with StartAside, a process that runs until the
// test kills it (a hook that runs long: a VIP script's arping, a hook
// stuck until --on-change-timeout), and ends it when the test does.
func startHookLike(t *testing.T) *os.Process {
	t.Helper()
	p, err := StartAside("/bin/sh", []string{"/bin/sh", "-c", "exec sleep 1000"}, &os.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		KillAside(p.Pid)
		p.Wait()
		EndAside(p.Pid)
	})
	return p
}

// joinAttempt waits for the tree's process to report its attempt to join
// the hook's group ("joined PID" or "refused PID") and returns its pid and
// whether it joined.
func joinAttempt(t *testing.T, out *syncBuf) (pid int, joined bool) {
	t.Helper()
	re := regexp.MustCompile(`(joined|refused) (\d+)`)
	waitUntil(t, testDeadline, func() bool {
		m := re.FindStringSubmatch(out.String())
		if m == nil {
			return false
		}
		pid, _ = strconv.Atoi(m[2])
		joined = m[1] == "joined"
		return true
	}, "no process of the tree tried to join the hook's group; output: %q", out.String())
	return pid, joined
}

// joinScript is a child's script whose process (perl) tries to join
// process group hook, says whether it could, and sleeps. Orphaned, it is
// started by a shell that exits at once, so that it is reparented to
// electd (a subreaper); else the child ignores SIGTERM (as its background
// perl then does), so that it is alive, with perl its child, when the stop
// lists the tree.
func joinScript(hook int, orphaned bool) string {
	if orphaned {
		return "echo started; sh -c 'perl -e \"\\$| = 1; print setpgrp(0, " + strconv.Itoa(hook) +
			") ? qq(joined \\$\\$\\n) : qq(refused \\$\\$ \\$!\\n); exec qw(sleep 1000)\" &'\nexec sleep 1000"
	}
	return "trap '' TERM; echo started; perl -e '$| = 1; print setpgrp(0, " + strconv.Itoa(hook) +
		") ? \"joined $$\\n\" : \"refused $$ $!\\n\"; exec \"sleep\", \"1000\"' &\nwait"
}

// TestTreeProcessCannotJoinAHookGroup: under pgroup the child's tree
// shares electd's session, and a process may join any group of its own
// session. A hook therefore has a session of its own (StartAside): else a
// process of the tree could join a running hook's group, where the tree's
// sweep spares it (orphaned: it outlived the stop, and, leaving the group
// again before the hook ended, ran on with no end) or the stop signals the
// hook's whole group with the tree's (a descendant: the hook was killed).
// Found by an adversarial review of the hooks; each case failed so.
func TestTreeProcessCannotJoinAHookGroup(t *testing.T) {
	tests := []struct {
		name     string
		orphaned bool
	}{
		{name: "descendant of the child", orphaned: false},
		{name: "orphan reparented to electd", orphaned: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.orphaned && orphanRule.strangers != "" {
				t.Skipf("the sweep reads environments here (%s)", orphanRule.strangers)
			}
			hook := startHookLike(t)
			c, out := runSh(t, joinScript(hook.Pid, tc.orphaned), ChildSpec{Containment: ContainPgroup, StopTimeout: time.Second})
			out.waitFor(t, "started")
			pid, joined := joinAttempt(t, out)
			killAtCleanup(t, pid, syscall.SIGKILL)
			if joined {
				t.Errorf("process %d of the child's tree joined the hook's process group %d", pid, hook.Pid)
			}
			stopOK(t, c, context.Background())
			if !procDead(pid) {
				t.Errorf("the child's stop returned with process %d of its tree alive", pid)
			}
			if procDead(hook.Pid) {
				t.Errorf("the child's stop killed the hook %d", hook.Pid)
			}
		})
	}
}
