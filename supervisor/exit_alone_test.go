package supervisor

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// When the command exits and nothing else is left of its namespace, the
// init says so ("empty") and, under pidns, the child ends at once: Done
// does not wait for the init's own exit and reaping, which are off a
// handover's path. The test holds the init at its exit (a tracer stops it
// there, with PTRACE_O_TRACEEXIT, before the kernel reaps anything of the
// namespace): Done must come all the same. Without the init's report, or
// without electd's reading of it, Done waits for the init to be released.
// Under userns the report is not taken (see nsTree.trustsEmpty): Done waits
// for the init's release there.
func TestDoneWhenAloneBeforeInitReaped(t *testing.T) {
	forModes(t, nsModes, func(t *testing.T, mode Containment) {
		fifo := mkfifo(t, t.TempDir())
		c, out := runSh(t, "echo up; read x < "+fifo+"; echo bye; exit 3", ChildSpec{Containment: mode})
		out.waitFor(t, "up")
		held, release := holdAtExit(t, c.Pid())
		defer release()
		letGo(t, fifo)
		<-held
		if mode != ContainPidns {
			select {
			case <-c.Done():
				t.Fatal("Done before the init was reaped, under " + string(mode))
			case <-time.After(300 * time.Millisecond): // a window for a wrong Done to show
			}
			release()
		}
		st := waitDone(t, c)
		if st.Code != 3 {
			t.Fatalf("exit %+v, want code 3", st)
		}
		// Its output comes to its end: the init closed its stdio too.
		out.waitFor(t, "bye\n")
		if mode == ContainPidns && procGone(c.Pid()) {
			t.Fatalf("the init %d is gone: the test did not hold it", c.Pid())
		}
	})
}

// A process of the tree that writes an "empty" line of its own into the
// init's status pipe (it can open it through /proc/INIT/fd/4 if it may
// ptrace the init) must not end the child while the tree runs. Under pidns
// the init is not dumpable, and a tree that is not root (here: the command
// drops to nobody) cannot open the pipe. Under userns the tree is root in
// the init's user namespace, with CAP_SYS_PTRACE over it, and writes the
// line (the review's 10 of 10; here too): electd does not take the word
// there. (From an adversarial review; a tree that is root on the host can
// write the line under pidns, and can as well write electd's memory.)
func TestForgedEmptyLine(t *testing.T) {
	for _, tt := range []struct {
		name   string
		mode   Containment
		prefix string // runs the script, as what
		want   string // what the tree's write gives: "forged", "refused", or "" for either
	}{
		{name: "userns", mode: ContainUserns},
		{name: "pidns, tree not root", mode: ContainPidns, prefix: "setpriv --reuid=65534 --regid=65534 --clear-groups ", want: "refused"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			needMode(t, tt.mode)
			if tt.prefix != "" {
				if _, err := exec.LookPath("setpriv"); err != nil {
					t.Skipf("SKIP: no setpriv (util-linux): %v", err)
				}
			}
			fifo := mkfifo(t, worldDir(t))
			script := `read me comm st ppid rest < /proc/self/stat; echo "me $me"; read x < ` + fifo + `; ` +
				`if echo "exited 0 0 empty" > /proc/$ppid/fd/4; then echo forged; else echo refused; fi; exec sleep 1000`
			// exec: the script's shell is the command, the init's child.
			c, out := runSh(t, "exec "+tt.prefix+"/bin/sh -c '"+script+"'", ChildSpec{Containment: tt.mode})
			me := pidOf(t, out.waitFor(t, "\n"), "me")
			letGo(t, fifo) // after the start: a line before "started" is no exit
			got := out.waitFor(t, "ed\n")
			if !strings.Contains(got, tt.want) {
				t.Fatalf("the tree's write of the line: %q, want %s", got, tt.want)
			}
			select {
			case <-c.Done():
				t.Fatalf("Done while command %d runs (alive: %v), on a line the tree wrote", me, !procDead(me))
			case <-time.After(300 * time.Millisecond): // a window for a wrong Done to show
			}
			if procDead(me) {
				t.Fatalf("command %d died: the test means it to run", me)
			}
		})
	}
}

// The other side of the rule: a process of the tree that outlives the
// command (a setsid'd daemon) keeps the init from reporting its namespace
// empty, so the child ends only once the init's exit has killed it. While
// the init is held at its exit the daemon still runs, and Done must not
// come; once it is released, Done comes with the daemon dead.
func TestDoneWaitsForLeftovers(t *testing.T) {
	forModes(t, nsModes, func(t *testing.T, mode Containment) {
		fifo := mkfifo(t, t.TempDir())
		script := `setsid sh -c 'read p rest < /proc/self/stat; echo "daemon $p"; exec sleep 1000' & read x < ` + fifo + `; exit 0`
		c, out := runSh(t, script, ChildSpec{Containment: mode})
		daemon := pidOf(t, out.waitFor(t, "\n"), "daemon")
		held, release := holdAtExit(t, c.Pid())
		defer release()
		letGo(t, fifo)
		<-held
		if procDead(daemon) {
			t.Fatalf("daemon %d dead while the init is held at its exit: the hold is not what the test means", daemon)
		}
		select {
		case <-c.Done():
			t.Fatalf("Done while daemon %d of the tree still runs (the init reported its namespace empty)", daemon)
		case <-time.After(300 * time.Millisecond): // a window for a wrong Done to show
		}
		release()
		waitDone(t, c)
		if !procDead(daemon) {
			t.Fatalf("Done, and daemon %d of the tree still runs", daemon)
		}
	})
}

// pidOf finds "WORD PID" in out and returns PID (read from /proc/self/stat,
// which, with the host's /proc, is the host's pid).
func pidOf(t *testing.T, out, word string) int {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if w, p, ok := strings.Cut(line, " "); ok && w == word {
			pid, err := strconv.Atoi(strings.TrimSpace(p))
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			return pid
		}
	}
	t.Fatalf("no %q line in %q", word, out)
	return 0
}

// mkfifo makes the fifo "go" in dir, which anyone may open: a command
// reads it to wait for the test (see letGo).
func mkfifo(t *testing.T, dir string) string {
	t.Helper()
	fifo := filepath.Join(dir, "go")
	if err := unix.Mkfifo(fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(fifo, 0o666); err != nil { // past the umask
		t.Fatal(err)
	}
	return fifo
}

// letGo opens the fifo for writing, which lets the command's read end.
func letGo(t *testing.T, fifo string) {
	t.Helper()
	f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("go\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// envHoldExit makes the test binary a tracer that holds the process whose
// pid it gives at its exit (see holdExitMain).
const envHoldExit = "ELECTD_TEST_HOLD_EXIT"

// holdAtExit has a tracer hold process pid at its exit: held is closed
// once pid has begun to exit and stopped there, before its exit is
// complete (a namespace init's tree is not yet killed, and the init not
// reaped); release lets it go on (and is safe to call more than once).
// The tracer is the test binary again: the test process is pid's parent,
// whose wait must not see the tracer's stops.
func holdAtExit(t *testing.T, pid int) (held <-chan struct{}, release func()) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), envHoldExit+"="+strconv.Itoa(pid))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = tWriter{t}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewReader(stdout)
	if line, err := lines.ReadString('\n'); line != "seized\n" {
		stdin.Close()
		_ = cmd.Wait()
		t.Fatalf("tracer of %d: %q, %v", pid, line, err)
	}
	h := make(chan struct{})
	go func() {
		if line, _ := lines.ReadString('\n'); line == "held\n" {
			close(h)
		}
		_, _ = io.Copy(io.Discard, lines)
	}()
	var once bool
	release = func() {
		if !once {
			once = true
			stdin.Close()
			if err := cmd.Wait(); err != nil {
				t.Errorf("tracer of %d: %v", pid, err)
			}
		}
	}
	t.Cleanup(release)
	return h, release
}

// holdExitMain is the tracer of holdAtExit: it seizes pid with
// PTRACE_O_TRACEEXIT, says "seized", passes every signal on, and once pid
// stops at its exit says "held" and keeps it there until its stdin ends.
func holdExitMain(arg string) int {
	runtime.LockOSThread() // ptrace requests come from the tracing thread
	pid, err := strconv.Atoi(arg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tracer:", err)
		return 2
	}
	if _, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SEIZE, uintptr(pid), 0, unix.PTRACE_O_TRACEEXIT, 0, 0); e != 0 {
		fmt.Fprintln(os.Stderr, "tracer: PTRACE_SEIZE:", e)
		return 1
	}
	fmt.Println("seized")
	for {
		var ws unix.WaitStatus
		if _, err := unix.Wait4(pid, &ws, unix.WALL, nil); err != nil {
			fmt.Fprintln(os.Stderr, "tracer: wait:", err)
			return 1
		}
		switch {
		case ws.Stopped() && ws.TrapCause() == unix.PTRACE_EVENT_EXIT:
			fmt.Println("held")
			_, _ = io.Copy(io.Discard, os.Stdin)
			if err := unix.PtraceDetach(pid); err != nil {
				fmt.Fprintln(os.Stderr, "tracer: PTRACE_DETACH:", err)
				return 1
			}
			return 0
		case ws.Stopped():
			sig := ws.StopSignal()
			if sig == unix.SIGTRAP {
				sig = 0 // an event stop of the seize's, not a signal
			}
			if err := unix.PtraceCont(pid, int(sig)); err != nil {
				fmt.Fprintln(os.Stderr, "tracer: PTRACE_CONT:", err)
				return 1
			}
		default:
			fmt.Fprintf(os.Stderr, "tracer: %d ended without its exit stop (%v)\n", pid, ws)
			return 1
		}
	}
}
