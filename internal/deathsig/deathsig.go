// Package deathsig starts child processes that die with their parent: the
// tests' store servers and electd processes, and the demo's sidecars.
//
// On Linux the child gets Pdeathsig = SIGKILL. The kernel sends that signal
// when the *thread* that forked the child exits, not the process, and the Go
// runtime may retire threads. So Start forks from a goroutine locked to its
// OS thread, and that goroutine stays on its thread, blocked in Wait, until
// the child is reaped: only the parent's own death sends the signal. (It
// reaches the direct child only, not its descendants.) Elsewhere there is no
// Pdeathsig, and a child outlives a parent killed with SIGKILL.
//
// The supervisor's child runner (supervisor.StartChild) follows the same
// rule with more around it (containment, signal dispositions) and does not
// use this package.
package deathsig

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Process is a child started by Start, reaped by its own goroutine.
type Process struct {
	Cmd *exec.Cmd

	done   chan struct{}
	state  *os.ProcessState // set before done closes
	err    error            // Wait's error
	reaped time.Time
}

// Start starts cmd so that it dies with this process (see the package doc),
// adding Pdeathsig to cmd.SysProcAttr and keeping the rest of it. Do not
// call cmd.Wait: the Process waits, and Done tells when it has.
func Start(cmd *exec.Cmd) (*Process, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	setDeathsig(cmd.SysProcAttr)
	p := &Process{Cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Unlocked only once the child is reaped: the thread lives as long
		// as the child does.
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		p.state, p.reaped = cmd.ProcessState, time.Now()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// Pid is the child's process id.
func (p *Process) Pid() int { return p.Cmd.Process.Pid }

// Done is closed once the child has been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the child has been reaped.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// State is the child's exit status (nil if Wait failed). Only after Done.
func (p *Process) State() *os.ProcessState { return p.state }

// Err is Wait's error. Only after Done.
func (p *Process) Err() error { return p.err }

// Reaped is when the child was reaped. Only after Done.
func (p *Process) Reaped() time.Time { return p.reaped }

// ExitCode is the shell's view of the exit: the code, or 128+signal; -1
// without an exit status. Only after Done.
func (p *Process) ExitCode() int {
	if p.state == nil {
		return -1
	}
	if ws, ok := p.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return p.state.ExitCode()
}

// Wait waits up to within for the child to be reaped and reports whether it was.
func (p *Process) Wait(within time.Duration) bool {
	t := time.NewTimer(within)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

// Alive reports whether pid exists and is not a zombie, by its
// /proc/PID/stat (false where there is no /proc).
func Alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the state follows the command name
	if i < 0 || len(s) < i+3 {
		return false
	}
	return s[i+2] != 'Z' && s[i+2] != 'X'
}
