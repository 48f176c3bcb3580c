package supervisor

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// envPreparedCmd names the command that TestPreparedDeathHelper prepares.
const envPreparedCmd = "ELECTD_TEST_PREPARED_CMD"

// TestPreparedDeathHelper plays a candidate electd for
// TestPreparedInitDiesWithElectd: it prepares the command named by
// envPreparedCmd under pidns, prints "prepared PID", and then, on a line
// "go" on stdin, begins it; it waits to be killed.
func TestPreparedDeathHelper(t *testing.T) {
	cmd := os.Getenv(envPreparedCmd)
	if cmd == "" {
		t.Skip("SKIP: a helper of TestPreparedInitDiesWithElectd")
	}
	spec := ChildSpec{Path: cmd, Args: []string{"1000"}, Containment: ContainPidns}
	c, err := PrepareChild(spec, nil, time.Time{})
	if err != nil {
		fmt.Println("PrepareChild:", err)
		os.Exit(3)
	}
	fmt.Println("prepared", c.Pid())
	s := bufio.NewScanner(os.Stdin)
	for s.Scan() {
		if s.Text() == "go" {
			err := c.Begin(spec)
			fmt.Println("begun", err)
		}
	}
	time.Sleep(time.Hour)
}

// TestPreparedInitDiesWithElectd: electd is killed with SIGKILL while its
// init is prepared (idle, ready), or after it sent the go message to an
// init held stopped before it read it; the init must die, and must not
// start the command. Also as nobody with the binary carrying
// cap_sys_admin+ep, where the kernel clears the Pdeathsig of electd's
// fork.
func TestPreparedInitDiesWithElectd(t *testing.T) {
	if os.Getenv(envPreparedCmd) != "" || os.Getenv(envAsNobody) != "" {
		t.Skip("SKIP: in a helper")
	}
	needMode(t, ContainPidns)
	if os.Geteuid() != 0 {
		t.Skip("SKIP: not root")
	}
	for _, asNobody := range []bool{false, true} {
		for _, phase := range []string{"idle", "go sent", "before ready"} {
			t.Run(fmt.Sprintf("%s nobody=%v", phase, asNobody), func(t *testing.T) {
				dir := worldDir(t)
				self, err := os.Executable()
				if err != nil {
					t.Fatal(err)
				}
				bin := self
				var argv []string
				if asNobody {
					setpriv, err := exec.LookPath("setpriv")
					if err != nil {
						t.Skip("SKIP: no setpriv")
					}
					bin = filepath.Join(dir, "electd.test")
					copyFile(t, self, bin, 0o755)
					if err := unix.Setxattr(bin, "security.capability", sysAdminCap(), 0); err != nil {
						t.Skipf("SKIP: cannot set a file capability: %v", err)
					}
					argv = []string{setpriv, "--reuid=" + strconv.Itoa(nobody), "--regid=" + strconv.Itoa(nobody), "--clear-groups", "--"}
				}
				argv = append(argv, bin, "-test.run=^TestPreparedDeathHelper$")
				sleep, _ := exec.LookPath("sleep")
				command := filepath.Join(dir, "sleep")
				copyFile(t, sleep, command, 0o755)
				for attempt := 0; ; attempt++ {
					if attempt == 10 {
						t.Skip("SKIP: the init was never caught before it was ready")
					}
					ino, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
					if err != nil {
						t.Fatal(err)
					}
					if _, err := unix.InotifyAddWatch(ino, command, unix.IN_OPEN); err != nil {
						t.Fatal(err)
					}
					execd := func() bool {
						buf := make([]byte, 4096)
						n, _ := unix.Read(ino, buf)
						return n > 0
					}
					helper := exec.Command(argv[0], argv[1:]...)
					helper.Dir = dir
					helper.Env = append(os.Environ(), envPreparedCmd+"="+command)
					helper.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
					out, _ := helper.StdoutPipe()
					in, _ := helper.StdinPipe()
					if err := helper.Start(); err != nil {
						t.Fatal(err)
					}
					lines := make(chan string, 16)
					go func() {
						s := bufio.NewScanner(out)
						for s.Scan() {
							lines <- s.Text()
						}
						close(lines)
					}()
					var initPid int
					if phase == "before ready" {
						// catch the init as soon as it exists
						initPid, _ = catchInit(t, helper.Process.Pid, execd)
						if initPid == 0 {
							t.Fatal("no init")
						}
						if writesOf(initPid) != 0 { // its "ready" is written
							t.Logf("attempt %d: init %d caught once ready; again", attempt, initPid)
							_ = helper.Process.Kill()
							_ = helper.Wait()
							_ = syscall.Kill(initPid, syscall.SIGCONT)
							unix.Close(ino)
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
						initPid, _ = strconv.Atoi(f[1])
					}
					if phase == "go sent" {
						if err := syscall.Kill(initPid, syscall.SIGSTOP); err != nil {
							t.Fatal(err)
						}
						waitUntil(t, testDeadline, func() bool { st, err := readStat(initPid); return err != nil || st.state == 'T' }, "stopped")
						fmt.Fprintln(in, "go")
						waitUntil(t, testDeadline, func() bool { return queuedIn(initPid, 3) > 0 }, "go message queued")
					}
					_ = helper.Process.Kill()
					_ = helper.Wait()
					_ = syscall.Kill(initPid, syscall.SIGCONT)
					waitUntil(t, testDeadline, func() bool { return procDead(initPid) }, "init %d to die with electd", initPid)
					var ws unix.WaitStatus
					_, _ = unix.Wait4(initPid, &ws, 0, nil)
					ran := execd()
					unix.Close(ino)
					if ran {
						t.Fatalf("the command was exec'd after electd died (init status %v)", ws)
					}
					t.Logf("init status %v", ws)
					return
				}
			})
		}
	}
}
