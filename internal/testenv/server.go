package testenv

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

const (
	readyTimeout = 15 * time.Second       // process start to first successful probe
	pollInterval = 10 * time.Millisecond  // readiness polling only
	stopGrace    = 10 * time.Second       // SIGTERM to SIGKILL in Stop
	probeTimeout = 500 * time.Millisecond // one readiness probe
	startTries   = 4                      // first start: new ports after a collision
	tailLines    = 60                     // log lines printed when a test failed
)

// errPortInUse marks a start that failed because a port was taken.
var errPortInUse = errors.New("port already in use")

// server runs one server binary, restartably, with a readiness probe.
type server struct {
	name    string          // "etcd", "redis-server": for messages
	bin     string          // path of the binary
	logPath string          // output of every run, appended
	args    func() []string // command line, evaluated at each start
	probe   func(pid int) error
	ready   time.Duration // start to first successful probe; 0: readyTimeout

	mu sync.Mutex
	p  *proc // current or last run; nil before the first
}

// lifecycle gives Etcd and Redis the methods that control their server
// process; each type's documentation says what a restart keeps.
type lifecycle struct{ srv *server }

// LogPath returns the file that receives the server's output, every run's
// appended.
func (l *lifecycle) LogPath() string { return l.srv.logPath }

// Pid returns the server's process id, or 0 when it is not running.
func (l *lifecycle) Pid() int { return l.srv.pid() }

// Stop sends SIGTERM and waits for the server to exit (SIGKILL after 10 s,
// reported as a test error). A no-op if it is not running.
func (l *lifecycle) Stop(t testing.TB) { t.Helper(); l.srv.stop(t) }

// Kill sends SIGKILL and waits for the server to exit. A no-op if it is not
// running.
func (l *lifecycle) Kill(t testing.TB) { t.Helper(); l.srv.kill(t) }

// Start starts a stopped server again on the same ports, and waits until it
// is ready.
func (l *lifecycle) Start(t testing.TB) { t.Helper(); l.srv.restart(t) }

// Restart is Stop then Start.
func (l *lifecycle) Restart(t testing.TB) {
	t.Helper()
	l.Stop(t)
	l.Start(t)
}

// process is a server process that a topology kills and starts again
// (lifecycle's methods): an etcd member, a Redis server, a RedisNode.
type process interface {
	Pid() int
	Kill(t testing.TB)
	Start(t testing.TB)
}

// killEach SIGKILLs each of ps.
func killEach[P process](t testing.TB, ps []P) {
	t.Helper()
	for _, p := range ps {
		p.Kill(t)
	}
}

// startStopped starts each of ps that is not running.
func startStopped[P process](t testing.TB, ps []P) {
	t.Helper()
	for _, p := range ps {
		if p.Pid() == 0 {
			p.Start(t)
		}
	}
}

// start runs the binary and waits until the probe succeeds.
func (s *server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p != nil && !s.p.Exited() {
		return fmt.Errorf("start %s: already running (pid %d)", s.name, s.p.Pid())
	}
	offset := logSize(s.logPath)
	p, err := startProc(s.bin, s.args(), s.logPath)
	if err != nil {
		return fmt.Errorf("start %s: %w", s.name, err)
	}
	s.p = p
	ready := s.ready
	if ready == 0 {
		ready = readyTimeout
	}
	deadline := time.Now().Add(ready)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		perr := s.probe(p.Pid())
		if perr == nil {
			return nil
		}
		select {
		case <-p.Done():
			err := fmt.Errorf("start %s: exited before ready: %w", s.name, p.exitError())
			if portInUse(logSince(s.logPath, offset)) {
				return fmt.Errorf("%w: %w", errPortInUse, err)
			}
			return err
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			_ = p.kill()
			return fmt.Errorf("start %s: not ready after %v: %w", s.name, ready, perr)
		}
	}
}

// current returns the running process, or nil.
func (s *server) current() *proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p == nil || s.p.Exited() {
		return nil
	}
	return s.p
}

func (s *server) pid() int {
	if p := s.current(); p != nil {
		return p.Pid()
	}
	return 0
}

// stop sends SIGTERM and waits; a no-op if not running.
func (s *server) stop(t testing.TB) {
	t.Helper()
	if p := s.current(); p != nil {
		if err := p.stop(stopGrace); err != nil {
			t.Errorf("testenv: %s: %v", s.name, err)
		}
	}
}

// kill sends SIGKILL and waits; a no-op if not running.
func (s *server) kill(t testing.TB) {
	t.Helper()
	if p := s.current(); p != nil {
		if err := p.kill(); err != nil {
			t.Errorf("testenv: %s: %v", s.name, err)
		}
	}
}

// restart starts a stopped server again, failing the test if it cannot.
func (s *server) restart(t testing.TB) {
	t.Helper()
	if err := s.start(); err != nil {
		t.Fatalf("testenv: %v\n%s", err, s.tail())
	}
}

// cleanup kills the server and, if the test failed, prints its log's tail.
func (s *server) cleanup(t testing.TB) {
	s.kill(t)
	if t.Failed() {
		t.Logf("testenv: %s", s.tail())
	}
}

func (s *server) tail() string {
	return fmt.Sprintf("last lines of %s log %s:\n%s", s.name, s.logPath, logTail(s.logPath, tailLines))
}

// firstStart starts s, choosing new ports with pick after a port collision.
func firstStart(t testing.TB, s *server, pick func() error) {
	t.Helper()
	for try := 1; ; try++ {
		if err := pick(); err != nil {
			t.Fatalf("testenv: start %s: %v", s.name, err)
		}
		err := s.start()
		if err == nil {
			return
		}
		if !errors.Is(err, errPortInUse) || try == startTries {
			t.Fatalf("testenv: %v (try %d)\n%s", err, try, s.tail())
		}
		t.Logf("testenv: %v; retrying with new ports", err)
	}
}
