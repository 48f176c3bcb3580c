package supervisor

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// runReaper runs ReapOrphans until the test ends.
func runReaper(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ReapOrphans(ctx, testLogger(t))
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

func zombieChildren() []int {
	pids, _ := childPids()
	var z []int
	for _, pid := range pids {
		if st, err := readStat(pid); err == nil && st.state == 'Z' {
			z = append(z, pid)
		}
	}
	return z
}

func TestReapOrphans(t *testing.T) {
	// A child leaves an orphan that outlives it: "( sleep & echo $! )" is a
	// double fork, the subshell exits at once and the sleep is adopted by us.
	c, out := runSh(t, "(sleep 1000 & echo $!); exit 7", ChildSpec{})
	g := grandchild(t, out)
	if st := waitDone(t, c); st.Code != 7 {
		t.Errorf("exit %+v, want code 7", st)
	}
	waitUntil(t, testDeadline, func() bool {
		st, err := readStat(g)
		return err == nil && st.ppid == syscall.Getpid()
	}, "orphan %d was not reparented to the test process (subreaper)", g)

	// Without a reaper it stays a zombie once it dies.
	if err := syscall.Kill(g, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, testDeadline, func() bool { st, err := readStat(g); return err == nil && st.state == 'Z' },
		"killed orphan %d did not become our zombie", g)

	runReaper(t)
	waitUntil(t, testDeadline, func() bool { return procGone(g) }, "zombie orphan %d was not reaped", g)
}

// TestReapOrphansKeepsChildStatus runs children that exit while orphans of
// theirs exit around them, so the reaper wakes up and scans just as our
// own children become zombies. Every child's exit code must still be exact
// (a stolen status would show as code -1), and no zombie may remain.
func TestReapOrphansKeepsChildStatus(t *testing.T) {
	runReaper(t)
	var orphans []int
	for i := range 40 {
		code := (i * 53) % 256
		if i == 1 {
			code = 255
		}
		script := fmt.Sprintf("(sleep 1000 & echo $!); (sh -c 'exit 9' &); (true &); exit %d", code)
		c, out := runSh(t, script, ChildSpec{})
		orphans = append(orphans, grandchild(t, out))
		st := waitDone(t, c)
		if st.Code != code || st.Signal != 0 {
			t.Fatalf("child %d: exit %+v, want code %d exactly", i, st, code)
		}
	}
	for _, g := range orphans {
		if err := syscall.Kill(g, syscall.SIGKILL); err != nil {
			t.Errorf("kill orphan %d: %v", g, err)
		}
	}
	for _, g := range orphans {
		waitUntil(t, testDeadline, func() bool { return procGone(g) }, "orphan %d was not reaped", g)
	}
	waitUntil(t, testDeadline, func() bool { return len(zombieChildren()) == 0 },
		"zombies remain: %v", zombieChildren())
}

// TestReapOrphansAdoptedZombie: an orphan that is already a zombie when it
// is reparented to electd (its parent never waited for it, then died) is
// reaped too. Its adoption is the only cue: the parent that dies is not
// electd's child, so no other SIGCHLD comes, and the reaper does not look
// on a timer.
func TestReapOrphansAdoptedZombie(t *testing.T) {
	runReaper(t)
	// p forks z and becomes a sleep that never waits; z exits once p is
	// that sleep (a z that ended before p's exec could be reaped by p's
	// shell, under load: "z did not become p's zombie" in one CI run), and
	// stays its zombie. The child, a sleep too, outlives p (its own exit
	// would have Stop's sweep reap the group).
	c, out := runSh(t, "( sh -c 'until [ \"$(cat /proc/$PPID/comm)\" = sleep ]; do :; done; exit 3' & echo $!; exec sleep 1000 ) & echo $!; exec sleep 1000", ChildSpec{})
	waitUntil(t, testDeadline, func() bool { return len(strings.Fields(out.String())) >= 2 }, "child printed %q, want two pids", out.String())
	lines := strings.Fields(out.String())
	var z, p int
	for _, l := range lines[:2] {
		pid, err := strconv.Atoi(l)
		if err != nil {
			t.Fatalf("child printed %q, want two pids", out.String())
		}
		killAtCleanup(t, pid, syscall.SIGKILL)
		if st, err := readStat(pid); err == nil && st.ppid == c.Pid() {
			p = pid
		} else {
			z = pid
		}
	}
	waitUntil(t, testDeadline, func() bool { st, err := readStat(z); return err == nil && st.state == 'Z' && st.ppid == p },
		"z %d did not become p %d's zombie", z, p)
	if err := syscall.Kill(p, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, testDeadline, func() bool { return procGone(z) }, "zombie %d adopted by the test process (subreaper) was not reaped", z)
}

func TestReapOrphansReturnsWhenNotSubreaper(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := BecomeSubreaper(); err != nil {
			t.Fatal(err)
		}
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		ReapOrphans(context.Background(), testLogger(t))
	}()
	select {
	case <-done:
	case <-time.After(testDeadline):
		t.Fatal("ReapOrphans kept running although nothing can be adopted")
	}
}

func TestChildPidsFallbackAgrees(t *testing.T) {
	c := runChild(t, ChildSpec{Path: "sleep", Args: []string{"1000"}})
	a, err := childPids()
	if err != nil {
		t.Fatal(err)
	}
	b, err := childPidsByScan()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(a, c.Pid()) || !slices.Contains(b, c.Pid()) {
		t.Errorf("child %d missing: /proc/self/task/*/children %v, scan %v", c.Pid(), a, b)
	}
}
