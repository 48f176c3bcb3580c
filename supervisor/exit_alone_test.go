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
// init says so ("empty") and the child ends at once: Done does not wait
// for the init's own exit and reaping, which are off a handover's path.
// The test holds the init at its exit (a tracer stops it there, with
// PTRACE_O_TRACEEXIT, before the kernel reaps anything of the namespace):
// Done must come all the same. Without the init's report, or without
// electd's reading of it, Done waits for the init to be released.
func TestDoneWhenAloneBeforeInitReaped(t *testing.T) {
	for _, mode := range nsModes {
		t.Run(string(mode), func(t *testing.T) {
			needMode(t, mode)
			fifo := filepath.Join(t.TempDir(), "go")
			if err := unix.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			c, out := runSh(t, "echo up; read x < "+fifo+"; echo bye; exit 3", ChildSpec{Containment: mode})
			out.waitFor(t, "up")
			held, release := holdAtExit(t, c.Pid())
			defer release()
			letGo(t, fifo)
			<-held
			st := waitDone(t, c)
			if st.Code != 3 {
				t.Fatalf("exit %+v, want code 3", st)
			}
			// Its output is all delivered: the init closed its stdio first.
			if got := out.String(); got != "up\nbye\n" {
				t.Fatalf("output %q", got)
			}
			if procGone(c.Pid()) {
				t.Fatalf("the init %d is gone: the test did not hold it", c.Pid())
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
	for _, mode := range nsModes {
		t.Run(string(mode), func(t *testing.T) {
			needMode(t, mode)
			fifo := filepath.Join(t.TempDir(), "go")
			if err := unix.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
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
