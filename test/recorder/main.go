// Command recorder is the child that electd runs in the end-to-end tests
// (test/e2e). It appends its life to the file named by $RECORD_LOG, in the
// format of package test/record: a start line, a beat every 5 ms, and a stop
// line when SIGTERM ends it (exit 0).
//
// Knobs, from the environment:
//
//	RECORD_LOG=path                  the log (required)
//	RECORD_IGNORE_TERM=1             log SIGTERM as "term" and keep beating
//	RECORD_EXIT_AFTER=duration       exit on its own after this long, with
//	RECORD_EXIT_CODE=n               code n (default 0); -N: kill itself with signal N
//	RECORD_SPAWN_GRANDCHILD=1        start `sleep 1000` in the recorder's own
//	                                 process group and log it as "grandchild"
//	RECORD_GRANDCHILD_IGNORE_TERM=1  the grandchild ignores SIGTERM (SIG_IGN is
//	                                 inherited across exec)
//	RECORD_ENV_FILE=path             write the environment there, one variable a
//	                                 line, before the start line
//	RECORD_WORKERS=1                 right after the start line, start three
//	                                 workers (see below) and log each as
//	                                 "spawned WORKERPID ROLE"
//	RECORD_WORKERS_IGNORE_TERM=1     the workers ignore SIGTERM: only SIGKILL
//	                                 ends them (else SIGTERM does). A worker
//	                                 ignores it from the first statement of
//	                                 main on: Go does not keep an inherited
//	                                 SIG_IGN for SIGTERM, so one that arrives
//	                                 while its runtime starts still kills it
//
// A worker is the recorder itself again (/proc/self/exe) with
// RECORD_ROLE=ROLE, and writes a "worker" line every 5 ms, from its first
// moment until it dies, under its recorder's node and token. It never stops
// on its own and does not die with its recorder: ending it is electd's job.
// The roles:
//
//	group   a plain child: it stays in the recorder's process group
//	setsid  a child that leaves the group (a session of its own)
//	daemon  a double fork: an intermediate (RECORD_ROLE=daemonize) starts
//	        the daemon in a session of its own, logs the spawned line, and
//	        exits at once, so the daemon is orphaned (reparented to a
//	        subreaper, or to the init of electd's PID namespace)
//
// Every pid in the log is the host's (the test's), even when electd runs
// the recorder in a PID namespace of its own: see hostPid.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/electd/electd/test/record"
)

const beatEvery = 5 * time.Millisecond

type recorder struct {
	f         *os.File
	node, tok string
	pid       int
}

func openLog(path string) *os.File {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fail("%v", err)
	}
	return f
}

func (r *recorder) write(kind, extra string) {
	// One write per line with O_APPEND: lines of many writers never interleave.
	if _, err := r.f.WriteString(record.Format(kind, r.node, r.tok, r.pid, time.Now(), extra)); err != nil {
		fail("write %s: %v", r.f.Name(), err)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "recorder: "+format+"\n", args...)
	os.Exit(2)
}

func main() {
	path := os.Getenv("RECORD_LOG")
	if path == "" {
		fail("$RECORD_LOG is not set")
	}
	switch role := os.Getenv(envRole); role {
	case "":
	case record.RoleGroup, record.RoleSetsid, record.RoleDaemon:
		work(path, role)
	case roleDaemonize:
		daemonize(path)
	default:
		fail("%s=%q: want %s, %s, %s or %s", envRole, role, record.RoleGroup, record.RoleSetsid, record.RoleDaemon, roleDaemonize)
	}
	exitAfter, exitCode := exitKnobs()
	if envPath := os.Getenv("RECORD_ENV_FILE"); envPath != "" {
		writeEnv(envPath)
	}
	r := &recorder{f: openLog(path), node: os.Getenv("ELECTD_ID"), tok: os.Getenv("ELECTD_FENCING_TOKEN"), pid: hostPid(os.Getpid())}

	terms := make(chan os.Signal, 4)
	gcIgnoresTerm := os.Getenv("RECORD_GRANDCHILD_IGNORE_TERM") == "1"
	if gcIgnoresTerm {
		signal.Ignore(syscall.SIGTERM) // the grandchild inherits SIG_IGN
	} else {
		signal.Notify(terms, syscall.SIGTERM)
	}
	r.write(record.KindStart, "")
	if os.Getenv("RECORD_WORKERS") == "1" {
		r.spawnWorkers()
	}
	gcPid := 0
	if os.Getenv("RECORD_SPAWN_GRANDCHILD") == "1" {
		gcPid = startGrandchild()
	}
	if gcIgnoresTerm {
		// Before the grandchild line: a SIGTERM sent as soon as a test sees
		// that line must reach us, not fall into SIG_IGN.
		signal.Notify(terms, syscall.SIGTERM)
	}
	if gcPid != 0 {
		r.write(record.KindGrandchild, strconv.Itoa(gcPid))
	}

	var exitC <-chan time.Time
	if exitAfter > 0 {
		exitC = time.After(exitAfter)
	}
	ignoreTerm := os.Getenv("RECORD_IGNORE_TERM") == "1"
	beat := time.NewTicker(beatEvery)
	for {
		select {
		case <-beat.C:
			r.write(record.KindBeat, "")
		case <-terms:
			if ignoreTerm {
				r.write(record.KindTerm, "ignored")
				continue
			}
			r.write(record.KindStop, "")
			os.Exit(0)
		case <-exitC:
			r.write(record.KindExit, strconv.Itoa(exitCode))
			if exitCode < 0 {
				// Our own pid, not r.pid: in electd's PID namespace the
				// host's pid names another process, or none.
				_ = syscall.Kill(os.Getpid(), syscall.Signal(-exitCode))
				select {} // until the signal lands
			}
			os.Exit(exitCode)
		}
	}
}

func exitKnobs() (time.Duration, int) {
	var (
		after time.Duration
		code  int
		err   error
	)
	if s := os.Getenv("RECORD_EXIT_AFTER"); s != "" {
		if after, err = time.ParseDuration(s); err != nil || after <= 0 {
			fail("RECORD_EXIT_AFTER=%q is not a positive duration", s)
		}
	}
	if s := os.Getenv("RECORD_EXIT_CODE"); s != "" {
		if code, err = strconv.Atoi(s); err != nil || code > 255 || code < -64 {
			fail("RECORD_EXIT_CODE=%q is not in -64..255", s)
		}
	}
	return after, code
}

// startGrandchild starts `sleep 1000` in the recorder's own process group
// and returns its host pid; a goroutine reaps it if it dies first.
func startGrandchild() int {
	cmd := exec.Command("sleep", "1000")
	if err := cmd.Start(); err != nil {
		fail("start grandchild: %v", err)
	}
	go func() { _ = cmd.Wait() }()
	return hostPid(cmd.Process.Pid)
}

const (
	envRole       = "RECORD_ROLE"
	envParent     = "RECORD_PARENT_PID" // the recorder's host pid, for the daemonize step
	roleDaemonize = "daemonize"
)

// spawnWorkers starts the three workers and logs a spawned line for each
// (the daemon's is written by the intermediate, which knows its pid). The
// group and setsid workers are reaped by a goroutine if they die first; the
// intermediate is waited for, so every spawned line is in the log when this
// returns.
func (r *recorder) spawnWorkers() {
	for _, role := range []string{record.RoleGroup, record.RoleSetsid} {
		cmd := r.self(role)
		if role == record.RoleSetsid {
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		}
		if err := cmd.Start(); err != nil {
			fail("start %s worker: %v", role, err)
		}
		pid := hostPid(cmd.Process.Pid) // while it is surely our child
		go func() { _ = cmd.Wait() }()
		r.write(record.KindSpawned, strconv.Itoa(pid)+" "+role)
	}
	cmd := r.self(roleDaemonize)
	// Run, not CombinedOutput: the daemon inherits the intermediate's
	// stderr, and a pipe held open by it would never reach EOF.
	if err := cmd.Run(); err != nil {
		fail("daemonize: %v", err)
	}
}

// self is a command that runs this program again as role, with the
// recorder's environment.
func (r *recorder) self(role string) *exec.Cmd {
	cmd := selfCommand()
	cmd.Env = append(os.Environ(), envRole+"="+role, envParent+"="+strconv.Itoa(r.pid))
	cmd.Stderr = os.Stderr
	return cmd
}

// selfCommand runs this program again (/proc/self/exe) under its own
// argv[0], so that a worker looks like the recorder to ps and to the tests.
func selfCommand() *exec.Cmd {
	cmd := exec.Command("/proc/self/exe")
	cmd.Args[0] = os.Args[0]
	return cmd
}

// daemonize is the intermediate of the double fork: it starts the daemon
// in a session of its own, logs the spawned line for the recorder
// ($RECORD_PARENT_PID) and exits, orphaning the daemon.
func daemonize(path string) {
	parent, err := strconv.Atoi(os.Getenv(envParent))
	if err != nil {
		fail("$%s=%q: %v", envParent, os.Getenv(envParent), err)
	}
	r := &recorder{f: openLog(path), node: os.Getenv("ELECTD_ID"), tok: os.Getenv("ELECTD_FENCING_TOKEN"), pid: parent}
	cmd := selfCommand()
	cmd.Env = append(os.Environ(), envRole+"="+record.RoleDaemon)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fail("start daemon: %v", err)
	}
	r.write(record.KindSpawned, strconv.Itoa(hostPid(cmd.Process.Pid))+" "+record.RoleDaemon)
	os.Exit(0) // without waiting: the daemon is orphaned
}

// work is a worker's life: a worker line every beat until it is killed.
func work(path, role string) {
	if os.Getenv("RECORD_WORKERS_IGNORE_TERM") == "1" {
		signal.Ignore(syscall.SIGTERM)
	}
	w := &recorder{f: openLog(path), node: os.Getenv("ELECTD_ID"), tok: os.Getenv("ELECTD_FENCING_TOKEN"), pid: hostPid(os.Getpid())}
	beat := time.NewTicker(beatEvery)
	for {
		w.write(record.KindWorker, role)
		<-beat.C
	}
}

// writeEnv writes the environment to path, sorted, atomically (rename).
func writeEnv(path string) {
	env := os.Environ()
	sort.Strings(env)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(env, "\n")+"\n"), 0o644); err != nil {
		fail("%v", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		fail("%v", err)
	}
}

// hostPid translates a pid of this process's PID namespace (electd may run
// as PID 1 of its own, as in a container) into the pid the test sees: the
// first NSpid field of /proc/<pid>/status, read through the test's /proc
// mount via our own children list. Outside a namespace it is pid itself.
func hostPid(nspid int) int {
	self, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nspid
	}
	myHost, myNS := nsPids(string(self))
	if len(myNS) < 2 { // not in a child namespace
		return nspid
	}
	if nspid == myNS[len(myNS)-1] {
		return myHost
	}
	// A child: find it among ours by its innermost pid.
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			st, err := os.ReadFile("/proc/" + f + "/status")
			if err != nil {
				continue
			}
			if h, ns := nsPids(string(st)); len(ns) > 0 && ns[len(ns)-1] == nspid {
				return h
			}
		}
	}
	return nspid
}

// nsPids parses the NSpid line: the outermost pid first.
func nsPids(status string) (int, []int) {
	for _, l := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(l, "NSpid:"); ok {
			var ids []int
			for _, f := range strings.Fields(v) {
				n, err := strconv.Atoi(f)
				if err != nil {
					return 0, nil
				}
				ids = append(ids, n)
			}
			if len(ids) == 0 {
				return 0, nil
			}
			return ids[0], ids
		}
	}
	return 0, nil
}
