package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/internal/deathsig"
	"github.com/electd/electd/test/proc"
	"github.com/electd/electd/test/record"
)

// The test binary is the recorder too: run with $RECORD_LOG set (by these
// tests, or as a worker re-executing /proc/self/exe), it is main.
func TestMain(m *testing.M) {
	if os.Getenv("RECORD_LOG") != "" {
		main()
		return
	}
	// Orphaned daemons reparent to the test, so that it can see that they
	// were orphaned, and reap them.
	if err := prctl(pr_SET_CHILD_SUBREAPER, 1); err != nil {
		fmt.Fprintln(os.Stderr, "recorder test: PR_SET_CHILD_SUBREAPER:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

const pr_SET_CHILD_SUBREAPER = 36

func prctl(op, arg uintptr) error {
	if _, _, e := syscall.Syscall(syscall.SYS_PRCTL, op, arg, 0); e != 0 {
		return e
	}
	return nil
}

const within = 10 * time.Second // generous: the machine is small and shared

// waitFor polls cond until it holds, failing the test after within.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(2 * time.Millisecond) // polling a condition with a deadline
	}
}

// start runs the test binary as the recorder in a process group of its own,
// logging to a new file, with node a and token 7.
func start(t *testing.T, cmd *exec.Cmd, env ...string) (*deathsig.Process, string) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "record.log")
	cmd.Env = proc.BaseEnv(append([]string{"RECORD_LOG=" + logPath, "ELECTD_ID=a", "ELECTD_FENCING_TOKEN=7"}, env...)...)
	cmd.Stderr = os.Stderr
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	p, err := deathsig.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Cmd.Process.Kill()
		<-p.Done()
		// Workers outlive the recorder: kill those a failed test left.
		lg, _ := record.ReadAll(logPath)
		for _, w := range lg.Workers {
			if proc.Alive(w.Pid) && proc.IsOurs(w.Pid, os.Args[0]) {
				t.Logf("killing leftover %s", w)
				_ = syscall.Kill(w.Pid, syscall.SIGKILL)
			}
		}
	})
	return p, logPath
}

// selfPath is the test binary, which is the recorder too.
func selfPath(t *testing.T) string {
	t.Helper()
	p, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func readAll(t *testing.T, path string) record.Log {
	t.Helper()
	lg, err := record.ReadAll(path)
	if err != nil {
		t.Fatal(err)
	}
	return lg
}

// stat is what the tests read of /proc/PID/stat.
type stat struct {
	state               byte
	ppid, pgrp, session int
}

func readStat(t *testing.T, pid int) stat {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	var st stat
	st.state = f[0][0]
	st.ppid, _ = strconv.Atoi(f[1])
	st.pgrp, _ = strconv.Atoi(f[2])
	st.session, _ = strconv.Atoi(f[3])
	return st
}

// workersOf waits until the log has a run with three spawned lines and a
// line from each of its three workers, and returns them by role.
func workersOf(t *testing.T, path string) (record.Run, map[string]record.Worker) {
	t.Helper()
	var (
		run record.Run
		ws  map[string]record.Worker
	)
	waitFor(t, "a run with three spawned workers, each writing", func() bool {
		lg := readAll(t, path)
		if len(lg.Runs) != 1 || len(lg.Runs[0].Spawned) != 3 {
			return false
		}
		run, ws = lg.Runs[0], map[string]record.Worker{}
		for _, w := range lg.WorkersOf(run) {
			ws[w.Role] = w
		}
		return len(ws) == 3
	})
	for _, s := range run.Spawned {
		if w, ok := ws[s.Role]; !ok || w.Pid != s.Pid {
			t.Errorf("spawned %s worker %d, but its worker lines are %+v", s.Role, s.Pid, w)
		}
	}
	for role, w := range ws {
		if w.Node != "a" || w.Token != 7 {
			t.Errorf("%s worker %s: want node a, token 7", role, w)
		}
	}
	return run, ws
}

// writesAfter waits until w has written a line after at.
func writesAfter(t *testing.T, path string, w record.Worker, at time.Time) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%s writes after %s", w, at.Format("15:04:05.000000")), func() bool {
		for _, v := range readAll(t, path).Workers {
			if v.Key() == w.Key() && v.Last.After(at) {
				return true
			}
		}
		return false
	})
}

func gone(t *testing.T, pid int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("pid %d gone", pid), func() bool { return !proc.Alive(pid) })
}

// signalWorkers sends sig to every worker.
func signalWorkers(t *testing.T, ws map[string]record.Worker, sig syscall.Signal) {
	t.Helper()
	for _, w := range ws {
		if err := syscall.Kill(w.Pid, sig); err != nil {
			t.Fatal(err)
		}
	}
}

// workersGone waits until every worker is gone.
func workersGone(t *testing.T, ws map[string]record.Worker) {
	t.Helper()
	for _, w := range ws {
		gone(t, w.Pid)
	}
}

// The recorder's workers: one in its group, one in a session of its own,
// one orphaned daemon. They outlive the recorder's SIGKILL (as an OOM kill)
// and die on SIGTERM.
func TestWorkers(t *testing.T) {
	p, path := start(t, exec.Command(selfPath(t)), "RECORD_WORKERS=1", "RECORD_EXIT_AFTER=300ms", "RECORD_EXIT_CODE=-9")
	run, ws := workersOf(t, path)
	if run.Pid != p.Pid() {
		t.Fatalf("run %s, want the recorder's pid %d", run, p.Pid())
	}
	if !p.Wait(within) {
		t.Fatal("the recorder did not kill itself")
	}
	if code := p.ExitCode(); code != 128+9 {
		t.Fatalf("recorder exit code %d, want 137 (SIGKILL)", code)
	}
	lg := readAll(t, path)
	run = lg.Runs[0]
	if run.ExitCode != -9 || run.Exit.IsZero() {
		t.Fatalf("run %s: want an exit line with -9", run)
	}
	for role, w := range ws {
		if !proc.IsOurs(w.Pid, os.Args[0]) {
			t.Errorf("%s worker %d does not look like the recorder (argv[0])", role, w.Pid)
		}
		st := readStat(t, w.Pid)
		switch role {
		case record.RoleGroup:
			if st.pgrp != p.Pid() {
				t.Errorf("group worker %d is in group %d, want the recorder's %d", w.Pid, st.pgrp, p.Pid())
			}
		case record.RoleSetsid, record.RoleDaemon:
			if st.session != w.Pid || st.pgrp != w.Pid {
				t.Errorf("%s worker %d: session %d, group %d; want its own", role, w.Pid, st.session, st.pgrp)
			}
		}
		if role == record.RoleDaemon && st.ppid != os.Getpid() {
			t.Errorf("daemon %d has parent %d, want the test (its subreaper, %d): not orphaned", w.Pid, st.ppid, os.Getpid())
		}
		writesAfter(t, path, w, run.End()) // it outlives the recorder
	}
	if err := readAll(t, path).Check(record.Options{}); err != nil {
		t.Errorf("Check of one term: %v", err)
	}
	signalWorkers(t, ws, syscall.SIGTERM)
	workersGone(t, ws)
}

// With RECORD_WORKERS_IGNORE_TERM=1 only SIGKILL ends a worker.
func TestWorkersIgnoreTerm(t *testing.T) {
	p, path := start(t, exec.Command(selfPath(t)), "RECORD_WORKERS=1", "RECORD_WORKERS_IGNORE_TERM=1")
	_, ws := workersOf(t, path)
	signalWorkers(t, ws, syscall.SIGTERM)
	termed := time.Now()
	for _, w := range ws {
		writesAfter(t, path, w, termed.Add(20*time.Millisecond))
		if !proc.Alive(w.Pid) {
			t.Errorf("%s died of SIGTERM", w)
		}
	}
	// The recorder itself still stops on SIGTERM.
	if err := syscall.Kill(p.Pid(), syscall.SIGTERM); err != nil || !p.Wait(within) || p.ExitCode() != 0 {
		t.Fatalf("recorder after SIGTERM: kill %v, exit code %d, want 0", err, p.ExitCode())
	}
	signalWorkers(t, ws, syscall.SIGKILL)
	workersGone(t, ws)
}

// In a PID namespace of its own (as electd runs it when root), the
// recorder writes host pids for itself and its workers, still kills itself
// with RECORD_EXIT_CODE=-9, and the workers die when the namespace's init
// does.
func TestWorkersInPidNamespace(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root for CLONE_NEWPID")
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	// sh is the namespace's init (pid 1), the recorder its child: the
	// kernel would drop a SIGKILL that init sends itself.
	cmd := exec.Command(sh, "-c", `"$0"; exec sleep 1000`, selfPath(t))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Cloneflags: syscall.CLONE_NEWPID}
	initProc, path := start(t, cmd, "RECORD_WORKERS=1", "RECORD_EXIT_AFTER=300ms", "RECORD_EXIT_CODE=-9")
	run, ws := workersOf(t, path)
	gone(t, run.Pid) // it killed itself
	pids := map[string]int{"recorder": run.Pid}
	for role, w := range ws {
		pids[role] = w.Pid
	}
	for who, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if who == "recorder" {
			continue // gone: its pid was checked by gone, which saw it die
		}
		if err != nil {
			t.Fatalf("%s pid %d is not a host pid: %v", who, pid, err)
		}
		host, ns := nsPids(string(b))
		if host != pid || len(ns) != 2 {
			t.Errorf("%s pid %d: NSpid %v, want %d first and a namespace pid", who, pid, ns, pid)
		}
		env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if err != nil || !strings.Contains(string(env), "\x00"+envRole+"="+who+"\x00") {
			t.Errorf("pid %d is not the %s worker (environ: %v)", pid, who, err)
		}
	}
	for _, w := range ws {
		writesAfter(t, path, w, readAll(t, path).Runs[0].End())
	}
	if err := initProc.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	workersGone(t, ws) // the kernel kills a namespace whose init died
}
