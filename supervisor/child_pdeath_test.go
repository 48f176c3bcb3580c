package supervisor

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestPdeathsig is the key safety test: when electd dies, even by kill -9,
// its child must die too. The helper (./internal/testchild) plays electd: it
// starts "sleep 1000" with StartChild and prints the sleep's pid; we kill -9
// the helper and wait for the sleep to die.
func TestPdeathsig(t *testing.T) {
	for _, mode := range []string{"plain", "churn"} {
		t.Run(mode, func(t *testing.T) {
			bin := testchildBin(t)
			cmd := exec.Command(bin, mode)
			// The sleep inherits the helper's stdout and stderr: if it
			// survived, a pipe-fed writer would keep cmd.Wait blocked.
			cmd.Stderr = os.Stderr
			cmd.WaitDelay = time.Second
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				cmd.Process.Kill()
				cmd.Wait()
			})
			lines := make(chan string, 1)
			go func() {
				line, _ := bufio.NewReader(stdout).ReadString('\n')
				lines <- line
			}()
			var line string
			select {
			case line = <-lines:
			case <-time.After(testDeadline):
				t.Fatal("helper printed no pid")
			}
			pid, err := strconv.Atoi(strings.TrimSpace(line))
			if err != nil {
				t.Fatalf("helper printed %q: %v", line, err)
			}
			t.Cleanup(func() {
				syscall.Kill(pid, syscall.SIGKILL)
				var ws syscall.WaitStatus
				syscall.Wait4(pid, &ws, syscall.WNOHANG, nil) // it was reparented to us
			})

			comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
			if err != nil || strings.TrimSpace(string(comm)) != "sleep" {
				t.Fatalf("pid %d is %q (%v), want the helper's sleep", pid, comm, err)
			}
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
