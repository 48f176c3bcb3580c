package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/electd/electd/internal/deathsig"
	pidwatch "github.com/electd/electd/test/proc"
)

// proc is one process the benchmark started. Each runs in its own process
// group (so that a kill of the group also reaches anything it forked that
// did not make a group of its own, such as etcdctl lock's command) and gets
// SIGKILL if the benchmark dies (deathsig.Start).
type proc struct {
	name string
	*deathsig.Process
}

func (p *proc) signal(sig syscall.Signal) error {
	if p.Exited() {
		return fmt.Errorf("%s (pid %d) has already exited", p.name, p.Pid())
	}
	return syscall.Kill(p.Pid(), sig)
}

// killGroup SIGKILLs the process's whole group and waits until it is reaped.
func (p *proc) killGroup() {
	_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
	if !p.Wait(5 * time.Second) {
		_ = p.Cmd.Process.Kill()
		p.Wait(5 * time.Second)
	}
}

// registry tracks every process started, and stray pids (orphaned children
// of killed peers), so that cleanup stops all of them.
type registry struct {
	mu     sync.Mutex
	procs  []*proc
	strays map[int]string // pid -> program it must be running
	closed bool
}

var procs = &registry{strays: map[int]string{}}

type startOpts struct {
	env    []string  // full environment; nil: ours
	stdout io.Writer // nil: the log file
	log    string    // file for stdout and stderr
}

// start runs bin with args. Output goes to o.log (appended).
func (r *registry) start(name, bin string, args []string, o startOpts) (*proc, error) {
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return nil, errors.New("shutting down")
	}
	var logf *os.File
	if o.log != "" {
		f, err := os.OpenFile(o.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		logf = f
		defer logf.Close()
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = o.env
	if logf != nil {
		cmd.Stdout, cmd.Stderr = logf, logf
	}
	if o.stdout != nil {
		cmd.Stdout = o.stdout
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pp, err := deathsig.Start(cmd) // SIGKILLed if the benchmark dies
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, Process: pp}
	r.mu.Lock()
	r.procs = append(r.procs, p)
	r.mu.Unlock()
	return p, nil
}

// stray registers a pid that must be killed at cleanup if it still runs prog.
func (r *registry) stray(pid int, prog string) {
	r.mu.Lock()
	r.strays[pid] = prog
	r.mu.Unlock()
}

// killAll kills every process group started and every stray, and waits.
func (r *registry) killAll() {
	r.mu.Lock()
	r.closed = true
	ps := append([]*proc(nil), r.procs...)
	strays := r.strays
	r.strays = map[int]string{}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range ps {
		if p.Exited() {
			// The group may still hold children (etcdctl lock's command).
			_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); p.killGroup() }()
	}
	wg.Wait()
	for pid, prog := range strays {
		if pidwatch.IsOurs(pid, prog) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// killIfOurs SIGKILLs pid if it still runs prog.
func killIfOurs(pid int, prog string) {
	if pidwatch.Alive(pid) && pidwatch.IsOurs(pid, prog) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// procStat reads a process's CPU time (user+system) and resident memory.
func procStat(pid int) (cpu time.Duration, rss, hwm int64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	f := strings.Fields(s[i+2:])
	// Fields after ")": state(0) ... utime(11) stime(12).
	if len(f) < 13 {
		return 0, 0, 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const hz = 100 // USER_HZ on Linux
	cpu = time.Duration(ut+st) * time.Second / hz
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, 0, err
	}
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			rss = parseKB(v)
		}
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			hwm = parseKB(v)
		}
	}
	return cpu, rss, hwm, nil
}

func parseKB(v string) int64 {
	f := strings.Fields(v)
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.ParseInt(f[0], 10, 64)
	return n * 1024
}

// baseEnv is our environment without ELECTD_*, RECORD_* and ETCDCTL_*
// settings, plus extra.
func baseEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "ELECTD_") || strings.HasPrefix(kv, "RECORD_") || strings.HasPrefix(kv, "ETCDCTL_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}
