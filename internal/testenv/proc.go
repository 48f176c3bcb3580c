package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/electd/electd/internal/deathsig"
)

// proc is one run of a server process.
type proc struct{ *deathsig.Process }

// startProc starts bin with its output appended to logPath, in its own
// process group, dying with the test binary (see package deathsig).
func startProc(bin string, args []string, logPath string) (*proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p, err := deathsig.Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	return &proc{p}, nil
}

// signal sends sig to the process group, or to the process if that fails.
func (p *proc) signal(sig syscall.Signal) error {
	if p.Exited() {
		return nil
	}
	if err := syscall.Kill(-p.Pid(), sig); err == nil {
		return nil
	}
	if err := p.Cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal %v to pid %d: %w", sig, p.Pid(), err)
	}
	return nil
}

// wait waits up to d for the process to be reaped.
func (p *proc) wait(d time.Duration) error {
	if !p.Wait(d) {
		return fmt.Errorf("wait for pid %d: still running after %v", p.Pid(), d)
	}
	return nil
}

// stop sends SIGTERM and waits up to grace, then SIGKILLs. It reports an
// error if SIGKILL was needed or the process could not be reaped.
func (p *proc) stop(grace time.Duration) error {
	if err := p.signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	if err := p.wait(grace); err == nil {
		return nil
	}
	if err := p.kill(); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	return fmt.Errorf("stop: pid %d ignored SIGTERM for %v; killed", p.Pid(), grace)
}

// kill sends SIGKILL and waits for the process to be reaped.
func (p *proc) kill() error {
	if err := p.signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill: %w", err)
	}
	if err := p.wait(killWait); err != nil {
		return fmt.Errorf("kill: %w", err)
	}
	return nil
}

const killWait = 10 * time.Second

// exitError describes how the process ended; call after done.
func (p *proc) exitError() error {
	if p.Err() == nil {
		return errors.New("exited with status 0")
	}
	return p.Err()
}

// logSize returns the current size of the log, to read one run's output later.
func logSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// logSince returns the log's content from offset on (at most the last 64 KiB).
func logSince(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size()-offset > 64<<10 {
		offset = st.Size() - 64<<10
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// logTail returns the last n lines of the log.
func logTail(path string, n int) string {
	s := strings.TrimRight(logSince(path, 0), "\n")
	lines := bytes.Split([]byte(s), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// portInUse reports whether a run's log says a listen address was taken.
func portInUse(log string) bool {
	return strings.Contains(strings.ToLower(log), "address already in use")
}
