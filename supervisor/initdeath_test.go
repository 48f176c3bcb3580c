package supervisor

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
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

const (
	// envInitDeathCmd names the command that TestInitDeathHelper starts.
	envInitDeathCmd = "ELECTD_TEST_INIT_DEATH_CMD"
	// envInitDeathOnGo, set, makes it begin the command only on a line
	// "go" on its stdin.
	envInitDeathOnGo = "ELECTD_TEST_INIT_DEATH_ON_GO"
)

// TestInitDeathHelper plays electd for TestNoExecAfterElectdDied and
// TestPreparedInitDiesWithElectd: it prepares the command named by
// envInitDeathCmd under pidns and prints "prepared PID"; then it begins
// it, at once (StartChild's two steps) or, with envInitDeathOnGo set, on
// a line "go" on its stdin, and prints "begun ERR"; it waits to be killed.
func TestInitDeathHelper(t *testing.T) {
	cmd := os.Getenv(envInitDeathCmd)
	if cmd == "" {
		t.Skip("SKIP: a helper of TestNoExecAfterElectdDied and TestPreparedInitDiesWithElectd")
	}
	spec := ChildSpec{Path: cmd, Args: []string{"1000"}, Containment: ContainPidns}
	c, err := PrepareChild(spec, nil, time.Time{})
	if err != nil {
		fmt.Println("PrepareChild:", err)
		os.Exit(3)
	}
	fmt.Println("prepared", c.Pid())
	if os.Getenv(envInitDeathOnGo) != "" {
		for s := bufio.NewScanner(os.Stdin); s.Scan() && s.Text() != "go"; {
		}
	}
	fmt.Println("begun", c.Begin(spec))
	time.Sleep(time.Hour)
}

// needElectdKillTest skips a test that kills an electd of its own (a
// helper process) unless it runs as root where pidns is available, and in
// that helper itself.
func needElectdKillTest(t *testing.T) {
	t.Helper()
	if os.Getenv(envInitDeathCmd) != "" || os.Getenv(envAsNobody) != "" {
		t.Skip("SKIP: in a helper")
	}
	needMode(t, ContainPidns)
	if os.Geteuid() != 0 {
		t.Skip("SKIP: not root")
	}
}

// TestNoExecAfterElectdDied: electd is killed with SIGKILL while its
// namespace init is starting (held stopped before it has started the
// command, as by a loaded host); once the init runs again it must not
// start the command: the tree dies with electd, even when electd dies
// before the command exists.
//
// The init must not count on the Pdeathsig that electd's fork gave it.
// The kernel clears a parent-death signal at an exec that raises
// privilege (AT_SECURE), and the init is electd's own binary, re-executed:
// with a file capability on that binary (setcap cap_sys_admin+ep electd,
// a way to give a non-root electd the CAP_SYS_ADMIN that pidns needs) the
// init runs without one. (Also, when electd dies between the clone and the
// child's prctl, Go's check of getppid, which it makes for that race,
// reads 0 in a new PID namespace, and its SIGKILL to itself, PID 1 there,
// is dropped by the kernel.) The init watched electd's end (the control
// pipe) only once the command was running.
//
// Whether the command was exec'd is seen with inotify on a private copy of
// it: an exec opens the file (IN_OPEN) before it returns.
func TestNoExecAfterElectdDied(t *testing.T) {
	needElectdKillTest(t)
	for _, tt := range []struct {
		name   string
		nobody bool // electd as nobody, its binary with cap_sys_admin+ep
	}{
		{name: "root"},
		{name: "nobody with a file capability", nobody: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			si := newStandIn(t, tt.nobody, "TestInitDeathHelper")
			for attempt := 0; ; attempt++ {
				if attempt == 10 {
					t.Skip("SKIP: the init was never caught before it started the command")
				}
				execd, unwatch := watchExec(t, si.command)
				helper, _, lines := si.start(t)
				initPid, caught := catchInit(t, helper.Process.Pid, execd)
				if initPid == 0 {
					_ = helper.Process.Kill()
					_ = helper.Wait()
					unwatch()
					t.Fatalf("no namespace init appeared; helper said %v", drain(lines))
				}
				if !caught {
					t.Logf("attempt %d: the command was started before the init was caught; again", attempt)
					_ = syscall.Kill(initPid, syscall.SIGCONT)
					_ = helper.Process.Kill()
					_ = helper.Wait()
					unwatch()
					continue
				}
				// electd dies, by kill -9, while its init is starting.
				killStandIn(t, helper, initPid, execd, unwatch)
				return
			}
		})
	}
}

// electdStandIn runs this test binary, one helper test of it, in place of
// electd: as root, or as nobody from a copy of the binary that carries
// cap_sys_admin+ep (a way to give a non-root electd the CAP_SYS_ADMIN
// that pidns needs, and one that makes the kernel clear the Pdeathsig of
// electd's fork at the init's exec).
type electdStandIn struct {
	dir     string   // world-readable; the copies live here
	argv    []string // how to run the stand-in
	command string   // a private copy of sleep, for watchExec
}

// newStandIn prepares a stand-in that runs the helper test run; it skips
// where the set-up is impossible here (with CI set, a missing setpriv
// fails).
func newStandIn(t *testing.T, asNobody bool, run string) electdStandIn {
	t.Helper()
	si := electdStandIn{dir: worldDir(t)}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := self
	if asNobody {
		setpriv, err := exec.LookPath("setpriv")
		if err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("setpriv is needed to run electd as nobody: %v", err)
			}
			t.Skipf("SKIP: no setpriv (util-linux) to run electd as nobody: %v", err)
		}
		bin = filepath.Join(si.dir, "electd.test")
		copyFile(t, self, bin, 0o755)
		if err := unix.Setxattr(bin, "security.capability", sysAdminCap(), 0); err != nil {
			t.Skipf("SKIP: cannot set a file capability: %v", err)
		}
		si.argv = []string{setpriv, "--reuid=" + strconv.Itoa(nobody), "--regid=" + strconv.Itoa(nobody), "--clear-groups", "--"}
	}
	si.argv = append(si.argv, bin, "-test.run=^"+run+"$")
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	si.command = filepath.Join(si.dir, "sleep")
	copyFile(t, sleep, si.command, 0o755)
	return si
}

// start starts the stand-in with envInitDeathCmd (naming its command)
// and env added to its environment, in a process group of its own, dying
// with the test; lines carries the lines of its stdout, and in is its
// stdin.
func (si electdStandIn) start(t *testing.T, env ...string) (helper *exec.Cmd, in io.WriteCloser, lines <-chan string) {
	t.Helper()
	helper = exec.Command(si.argv[0], si.argv[1:]...)
	helper.Dir = si.dir
	helper.Env = append(append(os.Environ(), envInitDeathCmd+"="+si.command), env...)
	helper.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if in, err = helper.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	ch := make(chan string, 16)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			ch <- s.Text()
		}
		close(ch)
	}()
	return helper, in, ch
}

// watchExec watches command with inotify: an exec opens the file
// (IN_OPEN) before it returns, so execd reports whether it was exec'd
// since the last call. unwatch ends the watch.
func watchExec(t *testing.T, command string) (execd func() bool, unwatch func()) {
	t.Helper()
	ino, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.InotifyAddWatch(ino, command, unix.IN_OPEN); err != nil {
		unix.Close(ino)
		t.Fatal(err)
	}
	execd = func() bool {
		buf := make([]byte, 4096)
		n, _ := unix.Read(ino, buf) // EAGAIN: nothing happened
		return n > 0
	}
	return execd, func() { unix.Close(ino) }
}

// killStandIn kills the stand-in electd with SIGKILL, lets its init
// (held stopped) go on, waits until the init is dead and reaps it (an
// orphan of ours: the test binary is a subreaper), and fails the test if
// the command was exec'd (execd, whose watch unwatch then ends).
func killStandIn(t *testing.T, helper *exec.Cmd, initPid int, execd func() bool, unwatch func()) {
	t.Helper()
	if err := helper.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = helper.Wait() // killed: its error says so
	_ = syscall.Kill(initPid, syscall.SIGCONT)
	waitUntil(t, testDeadline, func() bool { return procDead(initPid) }, "init %d to die with electd", initPid)
	var ws unix.WaitStatus
	_, _ = unix.Wait4(initPid, &ws, 0, nil) // ECHILD: reaped already
	ran := execd()
	unwatch()
	if ran {
		t.Fatalf("the command was exec'd after electd was killed with SIGKILL (the init's status: %v)", ws)
	}
}

// catchInit finds the namespace init that helper forks and SIGSTOPs it;
// caught is false if the command may have been started already.
func catchInit(t *testing.T, helper int, execd func() bool) (pid int, caught bool) {
	t.Helper()
	end := time.Now().Add(testDeadline)
	for time.Now().Before(end) {
		for _, p := range childrenOf(helper) {
			if isInit, _ := initOf(p); !isInit || !holdStopped(t, p) {
				continue
			}
			if len(childrenOf(p)) > 0 || execd() {
				return p, false
			}
			return p, true
		}
	}
	return 0, false
}

// childrenOf lists the children of pid, from every one of its threads.
func childrenOf(pid int) []int {
	var kids []int
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, w := range strings.Fields(string(b)) {
			if k, err := strconv.Atoi(w); err == nil {
				kids = append(kids, k)
			}
		}
	}
	return kids
}

func drain(lines <-chan string) []string {
	var got []string
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				return got
			}
			got = append(got, l)
		case <-time.After(100 * time.Millisecond):
			return got
		}
	}
}

// sysAdminCap is the security.capability value for cap_sys_admin+ep, as
// `setcap cap_sys_admin+ep` writes it (VFS_CAP_REVISION_2).
func sysAdminCap() []byte {
	const capSysAdmin = 21
	v := make([]byte, 20)
	binary.LittleEndian.PutUint32(v[0:], 0x02000000|1)   // revision 2, effective
	binary.LittleEndian.PutUint32(v[4:], 1<<capSysAdmin) // permitted, low word
	return v
}
