package supervisor

import (
	"context"
	"os"
	"path/filepath"
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

// joinedPid waits for "joined PID" in out and returns PID.
func joinedPid(t *testing.T, out *syncBuf) int {
	t.Helper()
	var pid int
	re := regexp.MustCompile(`joined (\d+)`)
	waitUntil(t, testDeadline, func() bool {
		m := re.FindStringSubmatch(out.String())
		if m == nil {
			return false
		}
		pid, _ = strconv.Atoi(m[1])
		return true
	}, "no process of the tree joined the hook's group; output: %q", out.String())
	return pid
}

// joinScript is a child's script whose process (perl) joins process group
// hook and then sleeps; orphaned, it is started by a shell that exits at
// once, so it is reparented to electd (a subreaper).
func joinScript(hook int, orphaned bool) string {
	perl := `perl -e '$| = 1; setpgrp(0, ` + strconv.Itoa(hook) + `) or die "setpgrp: $!\n"; print "joined $$\n"; exec "sleep", "1000"'`
	if orphaned {
		perl = `sh -c '` + `perl -e "\$| = 1; setpgrp(0, ` + strconv.Itoa(hook) + `) or die qq(setpgrp: \$!\n); print qq(joined \$\$\n); exec qw(sleep 1000)" &` + `'`
		return "echo started; " + perl + "\nexec sleep 1000"
	}
	// The child ignores SIGTERM (as its background perl then does), so
	// that it is alive, with perl its child, when the stop lists the tree.
	return "trap '' TERM; echo started; " + perl + " &\nwait"
}

// TestTreeProcessJoiningAHookGroupOutlivesTheStop: under pgroup, a process
// of the child's tree that joins a running hook's process group (setpgid;
// hooks are in electd's session, so any tree process may) and is orphaned
// to electd is spared by the sweep (asideLocked), so the child's stop
// returns with it alive: it outlives the term for as long as the hook runs
// (up to --on-change-timeout, 30s by default), while another copy may lead.
// Before hooks, only electd's own group gave this exemption.
func TestTreeProcessJoiningAHookGroupOutlivesTheStop(t *testing.T) {
	if orphanRule.strangers != "" {
		t.Skipf("the sweep reads environments here (%s)", orphanRule.strangers)
	}
	hook := startHookLike(t)
	c, out := runSh(t, joinScript(hook.Pid, true), ChildSpec{Containment: ContainPgroup, StopTimeout: time.Minute})
	out.waitFor(t, "started")
	escaped := joinedPid(t, out)
	waitUntil(t, testDeadline, func() bool {
		st, err := readStat(escaped)
		return err == nil && st.ppid == os.Getpid()
	}, "the joined process %d is not reparented to this process", escaped)
	if st, _ := readStat(escaped); st.pgrp != hook.Pid {
		t.Fatalf("the joined process is in group %d, not the hook's %d", st.pgrp, hook.Pid)
	}

	stopOK(t, c, context.Background())
	if !procDead(escaped) {
		t.Fatalf("the child's stop returned with a process of its tree (%d, in the hook's group %d) alive: it outlives the term while the hook runs",
			escaped, hook.Pid)
	}
}

// TestTreeProcessJoiningAHookGroupGetsTheHookKilled: under pgroup, a
// process of the child's tree that joins a running hook's group (still a
// descendant of the child) has that group listed among the tree's groups
// (treeMembers excludes electd's own group, not the aside ones), so the
// child's stop SIGKILLs the hook: OPERATIONS.md says "The child's stop
// never signals or waits for a hook".
func TestTreeProcessJoiningAHookGroupGetsTheHookKilled(t *testing.T) {
	hook := startHookLike(t)
	c, out := runSh(t, joinScript(hook.Pid, false), ChildSpec{Containment: ContainPgroup, StopTimeout: time.Second})
	out.waitFor(t, "started")
	joined := joinedPid(t, out)

	if st, _ := readStat(joined); st.pgrp != hook.Pid || st.ppid != c.Pid() {
		t.Fatalf("the joined process: group %d (want the hook's %d), parent %d (want the child %d)", st.pgrp, hook.Pid, st.ppid, c.Pid())
	}
	stopOK(t, c, context.Background())
	if procDead(hook.Pid) {
		t.Fatalf("the child's stop killed the hook %d (a process of the tree had joined its group)", hook.Pid)
	}
}

// TestTreeProcessLeavingAHookGroupOutlivesTheHook: the escape of
// TestTreeProcessJoiningAHookGroupOutlivesTheStop is not bounded by the
// hook's run: once the child's stop has returned, the process that hid in
// the hook's group moves to a group of its own (setpgid(0, 0)) before the
// hook ends; EndAside's kill of the hook's group then misses it, and no
// later sweep takes it (it started before any later child). A process of
// a stopped term's tree runs on with no end.
func TestTreeProcessLeavingAHookGroupOutlivesTheHook(t *testing.T) {
	if orphanRule.strangers != "" {
		t.Skipf("the sweep reads environments here (%s)", orphanRule.strangers)
	}
	hook, err := StartAside("/bin/sh", []string{"/bin/sh", "-c", "exec sleep 1000"}, &os.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	leave, script := filepath.Join(dir, "leave"), filepath.Join(dir, "escape.pl")
	perl := `$| = 1; setpgrp(0, ` + strconv.Itoa(hook.Pid) + `) or die "setpgrp: $!\n"; print "joined $$\n"; ` +
		`select(undef, undef, undef, 0.01) until -e "` + leave + `"; setpgrp(0, 0) or die "setpgrp: $!\n"; open(my $f, ">", "` + leave + `.left") or die; close($f); exec "sleep", "1000"`
	if err := os.WriteFile(script, []byte(perl), 0o600); err != nil {
		t.Fatal(err)
	}
	c, out := runSh(t, "echo started; sh -c 'perl "+script+" &'; exec sleep 1000",
		ChildSpec{Containment: ContainPgroup, StopTimeout: time.Minute})
	out.waitFor(t, "started")
	escaped := joinedPid(t, out)
	t.Cleanup(func() { syscall.Kill(escaped, syscall.SIGKILL) })
	waitUntil(t, testDeadline, func() bool {
		st, err := readStat(escaped)
		return err == nil && st.ppid == os.Getpid() && st.pgrp == hook.Pid
	}, "the process %d is not an orphan of this process in the hook's group", escaped)
	stopOK(t, c, context.Background())

	if err := os.WriteFile(leave, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, testDeadline, func() bool { _, err := os.Stat(leave + ".left"); return err == nil }, "the process %d did not leave the hook's group", escaped)
	// The hook ends as it does in hook.Runner.run: killed or exited, reaped, EndAside.
	if err := KillAside(hook.Pid); err != nil {
		t.Fatal(err)
	}
	if _, err := hook.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := EndAside(hook.Pid); err != nil {
		t.Fatal(err)
	}
	if !procDead(escaped) {
		st, _ := readStat(escaped)
		t.Fatalf("a process of the stopped child's tree (%d, now in its own group %d) outlived the child's stop and the hook's end",
			escaped, st.pgrp)
	}
}
