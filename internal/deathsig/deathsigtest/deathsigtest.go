// Package deathsigtest holds what the tests of the Pdeathsig rule share:
// internal/deathsig's and the supervisor's. Each runs a helper parent that
// starts "sleep 1000" so that it dies with the parent, kills the parent with
// SIGKILL and checks that the sleep dies too.
package deathsigtest

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RetireThreads makes the Go runtime end n OS threads: each runs a goroutine
// that exits while locked to its thread. A helper parent calls it after
// starting its child, to show that only the forking thread's exit would
// kill the child, and that thread stays locked until the child is reaped.
func RetireThreads(n int) {
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread() // exits locked: the runtime ends this thread
		}()
	}
	wg.Wait()
}

// StartParent starts parent, a helper that starts "sleep 1000", prints the
// sleep's pid on a line of its stdout and blocks until it is killed. It
// returns that pid once /proc shows a sleep there, and fails t if no pid is
// printed within. Cleanups kill the parent and the sleep, and reap the sleep
// if it was reparented to this process (a subreaper).
func StartParent(t testing.TB, parent *exec.Cmd, within time.Duration) int {
	t.Helper()
	// The sleep may inherit the parent's stdout and stderr: if it survived,
	// a pipe-fed writer would keep parent.Wait blocked.
	parent.Stderr = os.Stderr
	parent.WaitDelay = time.Second
	stdout, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = parent.Process.Kill()
		_ = parent.Wait()
	})
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- line
	}()
	var line string
	select {
	case line = <-lines:
	case <-time.After(within):
		t.Fatal("helper printed no pid")
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("helper printed %q: %v", line, err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
	})
	comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil || strings.TrimSpace(string(comm)) != "sleep" {
		t.Fatalf("pid %d is %q (%v), want the helper's sleep", pid, comm, err)
	}
	return pid
}
