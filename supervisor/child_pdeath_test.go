package supervisor

import (
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/internal/deathsig/deathsigtest"
)

// TestPdeathsig is the key safety test: when electd dies, even by kill -9,
// its child must die too. The helper (./internal/testchild) plays electd: it
// starts "sleep 1000" with StartChild and prints the sleep's pid; we kill -9
// the helper and wait for the sleep to die.
func TestPdeathsig(t *testing.T) {
	for _, mode := range []string{"plain", "churn"} {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.Command(testchildBin(t), mode)
			pid := deathsigtest.StartParent(t, cmd, testDeadline)
			st, err := readStat(pid)
			if err != nil || st.ppid != cmd.Process.Pid || procDead(pid) {
				t.Fatalf("sleep %d: %+v, %v; want alive, child of helper %d", pid, st, err, cmd.Process.Pid)
			}
			// In churn mode the helper retired threads before printing: none
			// of them may have been the one the child's Pdeathsig hangs on.

			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()
			waitUntil(t, 5*time.Second, func() bool { return procDead(pid) },
				"sleep %d still runs after its supervisor was killed with SIGKILL", pid)
		})
	}
}
