package supervisor

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestAsideSparedByTheSweep: a process that StartAside started after the
// child (a hook), and its orphan, reparented to electd but still in its
// group, are not the child's tree: stopping a pgroup child, whose sweep
// takes every orphan of electd that started after the child, leaves both
// running. EndAside then kills what is left of the group.
func TestAsideSparedByTheSweep(t *testing.T) {
	if orphanRule.strangers != "" {
		t.Skipf("the sweep reads environments here (%s): an orphan without the child's mark is spared anyway", orphanRule.strangers)
	}
	c, out := runSh(t, "echo started; exec sleep 1000", ChildSpec{Containment: ContainPgroup, StopTimeout: time.Minute})
	out.waitFor(t, "started")
	pidFile := filepath.Join(t.TempDir(), "orphan")
	script := "sh -c 'sleep 1000 & echo $! > " + pidFile + ".new; mv " + pidFile + ".new " + pidFile + "'; exec sleep 1001"
	p, err := StartAside("/bin/sh", []string{"/bin/sh", "-c", script}, &os.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	var orphan int
	waitUntil(t, testDeadline, func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		orphan, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		st, err := readStat(orphan)
		return err == nil && st.ppid == os.Getpid()
	}, "the hook's orphan is not reparented to this process")
	if st, _ := readStat(orphan); st.pgrp != p.Pid {
		t.Fatalf("the orphan %d is in group %d, not the hook's %d", orphan, st.pgrp, p.Pid)
	}

	stopOK(t, c, context.Background())
	if procDead(p.Pid) || procDead(orphan) {
		t.Fatalf("stopping the child killed the hook (%d dead: %v) or its orphan (%d dead: %v)",
			p.Pid, procDead(p.Pid), orphan, procDead(orphan))
	}

	if err := KillAside(p.Pid); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := EndAside(p.Pid); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, testDeadline, func() bool { return procDead(orphan) }, "the hook's orphan %d outlived its group's kill", orphan)
	reaperMu.Lock()
	_, isOwned := owned[p.Pid]
	isAside := asideLocked(p.Pid)
	reaperMu.Unlock()
	if isOwned || isAside {
		t.Errorf("after EndAside: owned %v, aside %v; want neither", isOwned, isAside)
	}
}
