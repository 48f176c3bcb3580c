package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// freezerRoot is the cgroup v1 freezer hierarchy. A task frozen there does
// not die of SIGKILL until it is thawed: it sits in uninterruptible sleep
// with the kill pending, like a process on a hung NFS mount.
const freezerRoot = "/sys/fs/cgroup/freezer"

// TestTermHeldWhileTreeSurvives: a process of the tree that survives
// SIGKILL keeps the term. The term is given up only once it is gone, in
// either mode (under pgroup electd waits for it past Stop's bound; under
// pidns the namespace's init cannot finish dying before it).
func TestTermHeldWhileTreeSurvives(t *testing.T) {
	if _, err := os.Stat(filepath.Join(freezerRoot, "cgroup.procs")); err != nil || os.Getuid() != 0 {
		if os.Getenv("CI") != "" && os.Getuid() == 0 {
			t.Fatalf("the cgroup v1 freezer is needed here: %v", err)
		}
		t.Skipf("SKIP: needs root and the cgroup v1 freezer at %s", freezerRoot)
	}
	forModes(t, modes, func(t *testing.T, mode Containment) {
		th := newTreeHarness(t, mode, OnExitResign, false, false, false)
		pids, frozen, thaw := th.grantFrozen(t, 70)

		resigned := make(chan error, 1)
		go func() { resigned <- th.sup.Resign(context.Background()) }()
		waitFor(t, "SIGKILL pending on the frozen worker, the others gone", func() bool {
			return killPending(frozen) && len(aliveOf(pids)) == 1
		})
		// Stop gives up on a tree after groupDrainTimeout: the term must
		// outlast that while the worker lives.
		select {
		case <-th.resigns:
			t.Fatalf("the term was given up while worker %d of the tree survived SIGKILL", frozen)
		case <-time.After(groupDrainTimeout + 2*time.Second):
		}
		thaw()
		if alive := th.awaitResign(t); len(alive) > 0 {
			t.Fatalf("workers %v of %v alive when the term was given up", alive, pids)
		}
		if err := <-resigned; err != nil {
			t.Fatalf("resign: %v", err)
		}
	})
}

// grantFrozen grants th the term token, then freezes the last worker of
// the child's tree (see freeze): pids is the tree, frozen the worker.
func (th *treeHarness) grantFrozen(t *testing.T, token uint64) (pids []int, frozen int, thaw func()) {
	t.Helper()
	th.grant(t, token)
	pids = treePids(t, th.pidFile)
	frozen = pids[len(pids)-1]
	return pids, frozen, freeze(t, frozen)
}

// freeze moves pid into a new freezer cgroup and freezes it; the returned
// func thaws it. The cgroup is removed when the test ends.
func freeze(t *testing.T, pid int) (thaw func()) {
	t.Helper()
	dir := filepath.Join(freezerRoot, fmt.Sprintf("electd-test-%d-%d", os.Getpid(), pid))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(file, v string) error { return os.WriteFile(filepath.Join(dir, file), []byte(v), 0o644) }
	thaw = func() {
		if err := write("freezer.state", "THAWED"); err != nil {
			t.Errorf("thaw: %v", err)
		}
	}
	t.Cleanup(func() {
		_ = write("freezer.state", "THAWED")
		_ = syscall.Kill(pid, syscall.SIGKILL)
		waitFor(t, "the freezer cgroup to empty", func() bool {
			err := os.Remove(dir)
			return err == nil || errors.Is(err, os.ErrNotExist)
		})
	})
	if err := write("cgroup.procs", strconv.Itoa(pid)); err != nil {
		t.Fatal(err)
	}
	if err := write("freezer.state", "FROZEN"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the worker frozen", func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "freezer.state"))
		return err == nil && strings.TrimSpace(string(b)) == "FROZEN"
	})
	return thaw
}

// killPending reports whether SIGKILL is pending for pid (its thread's or
// its process's pending set has bit 9).
func killPending(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "SigPnd" && k != "ShdPnd") {
			continue
		}
		if set, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && set&(1<<(syscall.SIGKILL-1)) != 0 {
			return true
		}
	}
	return false
}
