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
	exitAfter, exitCode := exitKnobs()
	if envPath := os.Getenv("RECORD_ENV_FILE"); envPath != "" {
		writeEnv(envPath)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fail("%v", err)
	}
	r := &recorder{f: f, node: os.Getenv("ELECTD_ID"), tok: os.Getenv("ELECTD_FENCING_TOKEN"), pid: hostPid(os.Getpid())}

	terms := make(chan os.Signal, 4)
	gcIgnoresTerm := os.Getenv("RECORD_GRANDCHILD_IGNORE_TERM") == "1"
	if gcIgnoresTerm {
		signal.Ignore(syscall.SIGTERM) // the grandchild inherits SIG_IGN
	} else {
		signal.Notify(terms, syscall.SIGTERM)
	}
	r.write(record.KindStart, "")
	if os.Getenv("RECORD_SPAWN_GRANDCHILD") == "1" {
		r.spawnGrandchild()
	}
	if gcIgnoresTerm {
		signal.Notify(terms, syscall.SIGTERM)
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
				_ = syscall.Kill(r.pid, syscall.Signal(-exitCode))
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

// spawnGrandchild starts `sleep 1000` in the recorder's own process group
// and logs its pid; a goroutine reaps it if it dies first.
func (r *recorder) spawnGrandchild() {
	cmd := exec.Command("sleep", "1000")
	if err := cmd.Start(); err != nil {
		fail("start grandchild: %v", err)
	}
	go func() { _ = cmd.Wait() }()
	r.write(record.KindGrandchild, strconv.Itoa(hostPid(cmd.Process.Pid)))
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
