package supervisor

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/test/proc"
)

// TestPreparedInitDiesWithElectd: electd is killed with SIGKILL while its
// init is prepared (idle, ready), or after it sent the go message to an
// init held stopped before it read it; the init must die, and must not
// start the command. Also as nobody with the binary carrying
// cap_sys_admin+ep, where the kernel clears the Pdeathsig of electd's
// fork.
func TestPreparedInitDiesWithElectd(t *testing.T) {
	needElectdKillTest(t)
	for _, asNobody := range []bool{false, true} {
		for _, phase := range []string{"idle", "go sent", "before ready"} {
			t.Run(fmt.Sprintf("%s nobody=%v", phase, asNobody), func(t *testing.T) {
				si := newStandIn(t, asNobody, "TestInitDeathHelper")
				for attempt := 0; ; attempt++ {
					if attempt == 10 {
						t.Skip("SKIP: the init was never caught before it was ready")
					}
					execd, unwatch := watchExec(t, si.command)
					helper, in, lines := si.start(t, envInitDeathOnGo+"=1")
					var initPid int
					if phase == "before ready" {
						// Caught as soon as it exists.
						initPid, _ = catchInit(t, helper.Process.Pid, execd)
						if initPid == 0 {
							t.Fatal("no namespace init appeared")
						}
						if proc.Writes(initPid) != 0 { // its "ready" is written
							t.Logf("attempt %d: init %d caught once ready; again", attempt, initPid)
							_ = helper.Process.Kill()
							_ = helper.Wait()
							_ = syscall.Kill(initPid, syscall.SIGCONT)
							unwatch()
							continue
						}
					} else {
						var line string
						select {
						case line = <-lines:
						case <-time.After(testDeadline):
							t.Fatal("no line from the helper")
						}
						f := strings.Fields(line)
						if len(f) != 2 || f[0] != "prepared" {
							t.Fatalf("helper: %q", line)
						}
						var err error
						if initPid, err = strconv.Atoi(f[1]); err != nil {
							t.Fatalf("helper: %q: %v", line, err)
						}
					}
					if phase == "go sent" {
						if err := syscall.Kill(initPid, syscall.SIGSTOP); err != nil {
							t.Fatal(err)
						}
						waitUntil(t, testDeadline, func() bool { st, err := readStat(initPid); return err != nil || st.state == 'T' }, "init %d stopped", initPid)
						if _, err := fmt.Fprintln(in, "go"); err != nil {
							t.Fatal(err)
						}
						waitUntil(t, testDeadline, func() bool { return queuedIn(initPid, 3) > 0 }, "the go message queued")
					}
					killStandIn(t, helper, initPid, execd, unwatch)
					return
				}
			})
		}
	}
}
