//go:build linux

package deathsig

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/internal/deathsig/deathsigtest"
)

// helperEnv makes this test binary the parent: it starts "sleep 1000" with
// Start, optionally retires OS threads ("churn"), prints the sleep's pid and
// blocks until it is killed.
const helperEnv = "DEATHSIG_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		helper(mode)
	}
	os.Exit(m.Run())
}

func helper(mode string) {
	// Keep the main thread to ourselves, so that Start's goroutine runs on
	// a thread the runtime may retire (it never retires the main thread).
	runtime.LockOSThread()
	p, err := Start(exec.Command("sleep", "1000"))
	if err != nil {
		println("deathsig helper:", err.Error())
		os.Exit(1)
	}
	if mode == "churn" {
		deathsigtest.RetireThreads(32)
	}
	os.Stdout.WriteString(strconv.Itoa(p.Pid()) + "\n")
	<-p.Done()
	os.Exit(1)
}

// TestChildDiesWithParent kills -9 a parent that started a child with
// Start: the child must die too. In churn mode the parent first retired
// threads, none of which may have been the one the child's Pdeathsig hangs on.
func TestChildDiesWithParent(t *testing.T) {
	for _, mode := range []string{"plain", "churn"} {
		t.Run(mode, func(t *testing.T) {
			parent := exec.Command(os.Args[0], "-test.run=^$")
			parent.Env = append(os.Environ(), helperEnv+"="+mode)
			pid := deathsigtest.StartParent(t, parent, 10*time.Second)
			if !Alive(pid) {
				t.Fatalf("sleep %d is not running before its parent was killed", pid)
			}
			if err := parent.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = parent.Wait()
			deadline := time.Now().Add(5 * time.Second)
			for Alive(pid) {
				if time.Now().After(deadline) {
					t.Fatalf("sleep %d still runs 5s after its parent was killed with SIGKILL", pid)
				}
				time.Sleep(5 * time.Millisecond) // polling a condition with a deadline
			}
		})
	}
}

// TestStartKeepsSysProcAttr: Start adds Pdeathsig to what the caller set.
func TestStartKeepsSysProcAttr(t *testing.T) {
	cmd := exec.Command("true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p, err := Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Wait(10 * time.Second) {
		t.Fatal("true has not exited after 10s")
	}
	if !cmd.SysProcAttr.Setpgid || cmd.SysProcAttr.Pdeathsig != syscall.SIGKILL {
		t.Fatalf("SysProcAttr = %+v, want Setpgid and Pdeathsig SIGKILL", cmd.SysProcAttr)
	}
	if p.ExitCode() != 0 || p.Err() != nil || p.Reaped().IsZero() {
		t.Fatalf("exit %d, err %v, reaped %v; want 0, nil, a time", p.ExitCode(), p.Err(), p.Reaped())
	}
}
