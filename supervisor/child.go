package supervisor

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/electd/electd/clock"
	"github.com/electd/electd/supervisor/internal/nsinit"
)

// ChildSpec describes the command that StartChild runs.
type ChildSpec struct {
	// Path is the program to run and Args its arguments (without argv[0];
	// argv[0] is Path as given). The program is exec'd directly, without a
	// shell. A Path without a slash is looked up in electd's own PATH, as
	// os/exec does.
	Path string
	Args []string

	// Shell runs the command line "Path Args..." (words joined by single
	// spaces; Path may be empty) with /bin/sh -c instead.
	Shell bool

	// Env is the child's complete environment, exactly as given. Nil means
	// an empty environment: electd's own environment (which may hold store
	// credentials) is never inherited implicitly.
	Env []string

	// Dir is the working directory; empty means electd's.
	Dir string

	// Stdout and Stderr receive the child's output untouched. Nil means
	// os.Stdout / os.Stderr, which the child then writes to directly. An
	// *os.File is also handed to the child directly; any other writer is fed
	// from a pipe. Stdin is always /dev/null: the child runs in its own
	// process group, which may not read from electd's terminal anyway.
	Stdout, Stderr io.Writer

	// StopSignal is what Stop sends to the process group first; 0 means
	// SIGTERM.
	StopSignal syscall.Signal

	// StopTimeout is how long Stop waits after StopSignal before it sends
	// SIGKILL to the whole tree. Zero (or negative) means StopSignal is sent
	// and SIGKILL follows at once, without a grace period.
	StopTimeout time.Duration

	// Containment is how the tree is held together: ContainPidns,
	// ContainUserns or ContainPgroup (the default; auto is resolved by the
	// Supervisor, see ResolveContainment).
	Containment Containment

	// StartBy, if not zero, is the last moment (on Clock) at which the
	// command may be exec'd: whatever execs it (electd under pgroup, the
	// namespace init under pidns) checks it on CLOCK_MONOTONIC, which every
	// process of the host shares, just before the exec, and does not exec
	// it once the moment has passed; StartChild then fails with an error
	// that is errStartLate. The Supervisor sets it to the term's stop-by
	// moment.
	StartBy time.Time
	// KillBy, if not zero, is when (on Clock) a start still pending is
	// killed: under pidns, if the init has not reported the command
	// started by then, electd SIGKILLs it (and so its namespace); under
	// pgroup, a start that returns after it is SIGKILLed at once. Either
	// way StartChild fails with errStartLate. The Supervisor sets it to
	// ValidUntil − StopMargin.
	KillBy time.Time

	// Clock times Stop's grace period; nil is the real clock. The grace
	// runs on its boot clock, which counts time the host spent suspended,
	// and once a suspension of more than SuspendBound since the start is
	// seen, the grace ends at once with SIGKILL (see Child.grace).
	Clock clock.Clock
}

func (s ChildSpec) stopSignal() syscall.Signal {
	if s.StopSignal == 0 {
		return syscall.SIGTERM
	}
	return s.StopSignal
}

// command returns the executable and argv to start.
func (s ChildSpec) command() (string, []string, error) {
	if s.Shell {
		words := s.Args
		if s.Path != "" {
			words = append([]string{s.Path}, s.Args...)
		}
		line := strings.Join(words, " ")
		if strings.TrimSpace(line) == "" {
			return "", nil, errors.New("empty shell command")
		}
		return "/bin/sh", []string{"/bin/sh", "-c", line}, nil
	}
	if s.Path == "" {
		return "", nil, errors.New("empty command path")
	}
	path := s.Path
	if filepath.Base(path) == path {
		lp, err := exec.LookPath(path)
		if err != nil {
			return "", nil, err
		}
		path = lp
	}
	return path, append([]string{s.Path}, s.Args...), nil
}

// errStartLate: the command was not exec'd, or was killed as it started,
// because the term's stop-by moment (StartBy) or ValidUntil − StopMargin
// (KillBy) had passed.
var errStartLate = errors.New("the term's stop-by moment passed before the command could start")

// ExitStatus says how a child ended.
type ExitStatus struct {
	// Code is the exit status (0..255) if the child exited normally, and -1
	// if it was killed by a signal (or its status is unknown).
	Code int
	// Signal is the signal that killed the child, or 0.
	Signal syscall.Signal
	// Killed is true if Stop escalated to SIGKILL and that SIGKILL is what
	// ended the child.
	Killed bool
	// Started and Exited are when the child was started and reaped.
	Started, Exited time.Time
}

// ExitCode is the shell convention: Code, or 128+N if signal N killed the
// child (SIGKILL gives 137).
func (e ExitStatus) ExitCode() int {
	if e.Signal != 0 {
		return 128 + int(e.Signal)
	}
	return e.Code
}

// Failed reports a failing exit: a code other than 0, or death by a signal
// (or an unknown status). It is meant for a child that exited on its own:
// the signal of a stop that electd sent is not the child's failure.
func (e ExitStatus) Failed() bool { return e.Signal != 0 || e.Code != 0 }

// Outcome classifies the exit for child_exits_total{outcome}: "killed" (Stop
// had to SIGKILL it), "signaled" (any other signal, including a graceful
// StopSignal), "success" (code 0) or "failure" (any other code).
func (e ExitStatus) Outcome() string {
	switch {
	case e.Killed:
		return "killed"
	case e.Signal != 0:
		return "signaled"
	case e.Code == 0:
		return "success"
	default:
		return "failure"
	}
}

// Child is a running (or finished) command started by StartChild, with its
// whole process tree. Under ContainPgroup it leads its own process group,
// whose id is its pid; under ContainPidns its pid is that of the namespace
// init, which leads a group of its own and runs the command.
type Child struct {
	spec ChildSpec
	tree tree // what differs by containment mode, chosen once (treeOf)
	log  *slog.Logger
	// path and argv are the command as resolved when the Child was made
	// (the program found in PATH), for the log.
	path string
	argv []string
	pid  int
	// proc is the forked process (its pidfd): under pidns and userns the
	// init is signalled through it, see nsTree.kill.
	proc    *os.Process
	ticks   uint64 // start time in clock ticks after boot, for treeMembers; set before the waiter can reap
	marker  string // the environment entry that marks the tree's processes
	started time.Time
	// suspended is spec.Clock's Suspended reading before the fork, against
	// which grace measures a suspension.
	suspended time.Duration

	// pidns and userns only: the init's control pipe (write end) and status pipe (read
	// end); see nsinit.go.
	ctl       *os.File
	status    *bufio.Reader
	statR     *os.File
	initSeen  chan struct{} // closed once Begin has read the status line of the start (or the init was dropped)
	begun     bool          // Begin told the init to start the command; set before initSeen is closed
	goSent    atomic.Bool   // the go message is written: the control pipe may carry forwarded signals
	pipesOnce sync.Once

	done       chan struct{} // closed once the child is reaped (or its tree is known gone) and exit is set
	forkReaped chan struct{} // closed once the forked process (under an init: the init) is reaped
	exit       ExitStatus

	escalated atomic.Bool // Stop sent SIGKILL before the child was reaped
	// groupGone: the child's process group was seen empty after the child
	// was reaped; its id may be reused, so it is not signalled any more.
	groupGone atomic.Bool
	outputs   []*copier

	stopOnce sync.Once
	stopDone chan struct{} // closed when the first Stop has finished
	stopErr  error
	killOnce sync.Once
	killNow  chan struct{} // closed by a Stop whose ctx ended: skip the grace
}

// tree is how a containment mode holds the child's process tree: treeOf
// picks one when the child is made (groupTree for pgroup in tree.go,
// nsTree for pidns and userns in child_init.go), and whatever differs
// between the modes is one of its methods.
type tree interface {
	// mode is the containment mode, for the log.
	mode() Containment
	// start starts spec's command and returns once it runs (StartChild).
	start(spec ChildSpec, log *slog.Logger) (*Child, error)
	// prepare forks a namespace init ready for Begin (PrepareChild), given
	// up once cancel is closed; pgroup has none (errNoInit).
	prepare(spec ChildSpec, log *slog.Logger, killBy time.Time, cancel <-chan struct{}) (*Child, error)
	// signal sends sig to the command's process group (Child.Signal), the
	// child not yet reaped.
	signal(c *Child, sig syscall.Signal) error
	// signalTree sends sig to every process of the tree.
	signalTree(c *Child, sig syscall.Signal)
	// kill sends sig to the process electd forked, or its group; a process
	// or group already gone is not an error.
	kill(c *Child, sig syscall.Signal)
	// awaitMain waits until the SIGKILLed child is reaped.
	awaitMain(c *Child)
	// sweep, once the child is reaped, ends what is left of its tree; the
	// error says how many processes survived.
	sweep(c *Child) error
	// trustsEmpty reports whether the init's word that the tree is empty
	// may end the child before the init is reaped.
	trustsEmpty() bool
}

// Signal sends sig to the command's process group: under pidns and userns
// through the namespace init's control pipe (the init forwards no signal
// sent to it; see nsinit), and only once Begin has sent the go message;
// else with kill(2). Once the child has been reaped it returns an error
// wrapping os.ErrProcessDone and sends nothing (the group id might be
// recycled); Stop still cleans up the group.
func (c *Child) Signal(sig syscall.Signal) error {
	select {
	case <-c.done:
		return fmt.Errorf("signal child %d: %w", c.pid, os.ErrProcessDone)
	default:
	}
	return c.tree.signal(c, sig)
}

// forkArgs is what fork starts.
type forkArgs struct {
	path            string
	argv            []string
	attr            *os.ProcAttr
	closeAfterStart []*os.File // the parent's copies of what only the child keeps
}

// newChild is a Child for spec, under tree t, not started, and what fork needs to start
// its command (attr without an environment).
func newChild(spec ChildSpec, log *slog.Logger, t tree) (*Child, forkArgs, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	path, argv, err := spec.command()
	if err != nil {
		return nil, forkArgs{}, err
	}
	c := &Child{
		spec:       spec,
		tree:       t,
		log:        log.WithGroup("child"),
		path:       path,
		argv:       argv,
		done:       make(chan struct{}),
		forkReaped: make(chan struct{}),
		stopDone:   make(chan struct{}),
		killNow:    make(chan struct{}),
	}
	files, closeAfterStart, err := c.childFiles()
	if err != nil {
		return nil, forkArgs{}, err
	}
	return c, forkArgs{
		path: path,
		argv: argv,
		attr: &os.ProcAttr{
			Dir:   spec.Dir,
			Files: files,
			Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
		},
		closeAfterStart: closeAfterStart,
	}, nil
}

// monotonicBy is the moment by on clk as a reading of CLOCK_MONOTONIC
// (clock.Monotonic), which every process of the host shares; 0 for none.
func monotonicBy(clk clock.Clock, by time.Time) time.Duration {
	if by.IsZero() {
		return 0
	}
	return max(1, clock.Monotonic()+by.Sub(clk.Now()))
}

// fork starts fa on run's goroutine, not after startBy (on
// CLOCK_MONOTONIC; 0: any time), and returns once it was started or not.
func (c *Child) fork(fa forkArgs, startBy time.Duration) error {
	nsinit.DefaultDispositions()
	started := make(chan error, 1)
	go c.run(fa.path, fa.argv, fa.attr, startBy, started)
	err := <-started
	for _, f := range fa.closeAfterStart {
		f.Close()
	}
	return err
}

// closeOutputs closes the read ends of output pipes whose copiers never
// ran (a start that failed).
func (c *Child) closeOutputs() {
	for _, o := range c.outputs {
		o.r.Close()
	}
}

// run forks the child on a locked OS thread (see StartChild), reports the
// result on started, then waits for the child on that same thread.
func (c *Child) run(path string, argv []string, attr *os.ProcAttr, startBy time.Duration, started chan<- error) {
	defer close(c.forkReaped)
	runtime.LockOSThread()
	if startBy > 0 && clock.Monotonic() >= startBy {
		runtime.UnlockOSThread()
		started <- errStartLate
		return
	}
	proc, err := startOwned(path, argv, attr)
	if err != nil {
		runtime.UnlockOSThread()
		started <- err
		return
	}
	c.pid, c.proc = proc.Pid, proc
	if c.status == nil {
		c.started = time.Now() // under an init, Begin sets it
	}
	// Read before the wait below: until it, the child is ours and cannot be
	// reaped (by anyone), so its /proc entry is there even if it has exited.
	// Read after, it could be 0, which would leave its orphans unmatched.
	c.ticks = startTime(c.pid)
	started <- nil

	// Under an init, its status line of the command's exit may say the
	// tree is gone before the init itself is reaped ("empty"): statusRead
	// reads it meanwhile (and the init's status once it is reaped), and
	// then ends the child at once, under pidns only (see nsTree.trustsEmpty).
	var (
		is         initStatus
		statusRead chan struct{}
	)
	if c.status != nil {
		statusRead = make(chan struct{})
		go func() {
			defer close(statusRead)
			<-c.initSeen // Begin has set started and begun, or never will
			for readInitStatus(c.status, &is, true) == nil {
				if c.begun && is.empty && c.tree.trustsEmpty() {
					c.ended(ExitStatus{Code: is.code, Signal: is.signal, Started: c.started, Exited: time.Now()})
					return
				}
				is.empty = false // read on: the init's own line may follow
			}
		}()
	}
	state, err := proc.Wait()
	exited := time.Now()
	disown(c.pid)
	// The child is reaped: the forking thread may now go back to the pool.
	runtime.UnlockOSThread()

	if c.status != nil {
		<-statusRead // and so Begin is done: c.started is set
	}
	st := ExitStatus{Code: -1, Started: c.started, Exited: exited}
	if err != nil {
		c.log.Error("wait failed; exit status unknown", "pid", c.pid, "err", err)
	} else if ws, ok := state.Sys().(syscall.WaitStatus); ok {
		switch {
		case ws.Exited():
			st.Code = ws.ExitStatus()
		case ws.Signaled():
			st.Signal = ws.Signal()
		}
	}
	if c.status != nil {
		// The init's exit code folds a signal into 128+N: its status line
		// has the command's exact status. No line: the init itself was
		// killed (our SIGKILL, or electd's death), and with it the tree.
		c.closeInitPipes() // the init is gone; nothing reads or writes them
		switch {
		case c.begun && is.empty && c.tree.trustsEmpty():
			return // ended when the init reported it
		case !c.begun:
			c.exit = st
			c.log.Debug("prepared namespace init ended unused", "pid", c.pid)
			close(c.done)
			return
		case is.exited:
			st.Code, st.Signal = is.code, is.signal
		}
	}
	c.ended(st)
}

// ended records how the child ended, once its whole tree is gone, and
// closes done.
func (c *Child) ended(st ExitStatus) {
	st.Killed = st.Signal == syscall.SIGKILL && c.escalated.Load()
	c.exit = st
	attrs := []any{"pid", c.pid, "code", st.ExitCode(), "outcome", st.Outcome(), "runtime", st.Exited.Sub(c.started)}
	if st.Signal != 0 {
		attrs = append(attrs, "signal", signalName(st.Signal))
	}
	c.log.Info("exited", attrs...)
	close(c.done)
}

// Pid is the child's process id, which is also its process group id.
func (c *Child) Pid() int { return c.pid }

// Done is closed when the child has exited and been reaped. Other members of
// its process group may still run under pgroup; Stop ends them. Under pidns
// and userns the whole tree is gone by then: the init has been reaped (and
// so its namespace killed), or (under pidns) it reported, as the command
// exited, that nothing else was left of the namespace, and it is reaped
// later (see Reaped).
func (c *Child) Done() <-chan struct{} { return c.done }

// Reaped is closed once the process electd forked (under pidns and userns:
// the namespace init) is reaped, after Done.
func (c *Child) Reaped() <-chan struct{} { return c.forkReaped }

// Exit is the child's exit status. It is meaningful only once Done is closed;
// before that it has only Started set and Code -1.
func (c *Child) Exit() ExitStatus {
	select {
	case <-c.done:
		return c.exit
	default:
		return ExitStatus{Code: -1, Started: c.started}
	}
}

// childFiles builds the child's stdin, stdout and stderr. closeAfterStart are
// the parent's copies of descriptors that only the child must keep.
func (c *Child) childFiles() (files, closeAfterStart []*os.File, err error) {
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, nil, err
	}
	files = []*os.File{devnull, nil, nil}
	closeAfterStart = []*os.File{devnull}
	fail := func(err error) ([]*os.File, []*os.File, error) {
		for _, f := range closeAfterStart {
			f.Close()
		}
		for _, o := range c.outputs {
			o.r.Close()
		}
		c.outputs = nil
		return nil, nil, err
	}
	stdout, stderr := c.spec.Stdout, c.spec.Stderr
	if stdout == nil {
		stdout = os.Stdout
	}
	if stderr == nil {
		stderr = os.Stderr
	}
	for i, w := range []io.Writer{stdout, stderr} {
		if f, ok := w.(*os.File); ok {
			files[i+1] = f
			continue
		}
		if i == 1 && sameWriter(stdout, stderr) {
			files[2] = files[1] // one pipe keeps writes to a shared writer serial
			continue
		}
		r, pw, err := os.Pipe()
		if err != nil {
			return fail(err)
		}
		files[i+1] = pw
		closeAfterStart = append(closeAfterStart, pw)
		c.outputs = append(c.outputs, &copier{r: r, w: w, done: make(chan struct{})})
	}
	return files, closeAfterStart, nil
}

// sameWriter reports whether a and b are the same writer; writers of
// uncomparable types are never the same.
func sameWriter(a, b io.Writer) (same bool) {
	defer func() { _ = recover() }()
	return a == b
}

// copier feeds one output pipe to a writer until every write end is closed
// (the child and the rest of its group are gone) or Stop closes r.
type copier struct {
	r    *os.File
	w    io.Writer
	done chan struct{}
}

func (o *copier) run() {
	defer close(o.done)
	defer o.r.Close()
	_, _ = io.Copy(o.w, o.r)
}

func signalName(sig syscall.Signal) string {
	if sig == 0 {
		return ""
	}
	if name := unix.SignalName(sig); name != "" {
		return name
	}
	return fmt.Sprintf("signal %d", int(sig))
}

// tryCtl writes b on the init's control pipe without waiting: a pipe that
// is full (an init that does not read it: stopped, or hung) is EAGAIN, so
// that neither a stop nor a forwarded signal ever blocks electd.
func (c *Child) tryCtl(b byte) error {
	rc, err := c.ctl.SyscallConn()
	if err != nil {
		return err
	}
	var werr error
	if err := rc.Write(func(fd uintptr) bool {
		for {
			_, werr = syscall.Write(int(fd), []byte{b})
			if !errors.Is(werr, syscall.EINTR) {
				return true // done, or an error of its own: never wait
			}
		}
	}); err != nil {
		return err
	}
	return werr
}

// closeInitPipes closes electd's ends of the init's pipes, once; without
// a namespace init there are none.
func (c *Child) closeInitPipes() {
	c.pipesOnce.Do(func() {
		if c.ctl != nil {
			c.ctl.Close()
			c.statR.Close()
		}
	})
}
