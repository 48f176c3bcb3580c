package kit

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/internal/deathsig"
	"github.com/electd/electd/internal/testenv"
	"github.com/electd/electd/test/proc"
)

const (
	// LiveTimeout is how long StartLive waits from electd's start to /livez.
	LiveTimeout = 15 * time.Second
	// TailLines is how much of an electd's log Tail shows.
	TailLines = 80
	// startTries is how many ports StartLive tries: a free port found by
	// testenv.FreePort may be taken before electd binds it.
	startTries = 3
)

// Electd is one electd process that a suite started: its output goes to a
// log file, and when it listens, Do and its kin talk to its HTTP API. It
// dies with the test process (internal/deathsig); the suite kills it at
// cleanup.
type Electd struct {
	*deathsig.Process
	ID      string
	HTTP    string    // host:port of its HTTP API; empty unless started by StartLive
	LogPath string    // its stdout and stderr (and its child's)
	Started time.Time // when it was started

	t      testing.TB
	client *http.Client
}

// Spec is how to start one electd.
type Spec struct {
	ID string
	// Args are electd's arguments, its command first. StartLive adds
	// --listen right after the command.
	Args []string
	// Env is appended to the test's environment less ELECTD_* and RECORD_*
	// settings (proc.BaseEnv).
	Env []string
	// LogPath is the file electd's stdout and stderr are appended to.
	LogPath string
	// Banner, if not empty, is written to the log as a line of its own
	// before electd starts (a log that several processes append to).
	Banner string
	// SysProcAttr is the start's; deathsig adds Pdeathsig to it.
	SysProcAttr *syscall.SysProcAttr
	// Wrap, if set, is a command that electd's path and Args are appended
	// to, which runs electd in the end (exec), e.g. in a namespace of the
	// test's making.
	Wrap []string
	// HTTPTimeout bounds each request to its API; zero: 5 s.
	HTTPTimeout time.Duration
	// Started, if set, is called with each process right after it started,
	// before StartLive waits for /livez: a suite that keeps every process
	// it started for its checks keeps those of failed tries too.
	Started func(*Electd)
}

// Start starts bin's electd as spec says, without waiting for anything.
func (b *Binaries) Start(t testing.TB, spec Spec) (*Electd, error) {
	return b.start(t, spec, "")
}

// StartLive starts bin's electd as spec says, listening on a free loopback
// port, and waits until its /livez answers 200. If the port was taken in
// the meantime, it tries another (three in all). A failed try leaves no
// process behind: one that has not exited is SIGKILLed.
func (b *Binaries) StartLive(t testing.TB, spec Spec) (*Electd, error) {
	t.Helper()
	for try := 1; ; try++ {
		e, err := b.start(t, spec, "127.0.0.1:"+strconv.Itoa(testenv.FreePort(t)))
		if err == nil {
			if err = e.waitLive(); err == nil {
				return e, nil
			}
			e.Kill()
		}
		if !strings.Contains(err.Error(), "address already in use") || try == startTries {
			return nil, err
		}
		t.Logf("start %s: %v; retrying on another port", spec.ID, err)
	}
}

func (b *Binaries) start(t testing.TB, spec Spec, listen string) (*Electd, error) {
	timeout := spec.HTTPTimeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	e := &Electd{
		ID: spec.ID, HTTP: listen, LogPath: spec.LogPath, t: t,
		client: &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}},
	}
	args := spec.Args
	if listen != "" && len(args) > 0 {
		args = slices.Concat(args[:1], []string{"--listen", listen}, args[1:])
	}
	logf, err := os.OpenFile(spec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	if spec.Banner != "" {
		fmt.Fprintln(logf, spec.Banner)
	}
	cmd := exec.Command(b.Electd, args...)
	if len(spec.Wrap) > 0 {
		cmd = exec.Command(spec.Wrap[0], slices.Concat(spec.Wrap[1:], []string{b.Electd}, args)...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(proc.BaseEnv(), spec.Env...)
	cmd.SysProcAttr = spec.SysProcAttr
	if e.Process, err = deathsig.Start(cmd); err != nil { // dies with the test
		return nil, err
	}
	e.Started = time.Now()
	if spec.Started != nil {
		spec.Started(e)
	}
	return e, nil
}

// waitLive waits until /livez answers 200, electd exits, or LiveTimeout.
func (e *Electd) waitLive() error {
	deadline := time.Now().Add(LiveTimeout)
	for {
		if code, _, err := e.Get("/livez"); err == nil && code == http.StatusOK {
			return nil
		}
		select {
		case <-e.Done():
			return fmt.Errorf("electd exited with %d before /livez answered:\n%s", e.Exit(), e.Tail())
		case <-time.After(PollEvery):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("/livez not 200 after %s:\n%s", LiveTimeout, e.Tail())
		}
	}
}

// Exit is the shell's view of the exit: the code, or 128+signal. It fails
// the test if there is no exit status. Only after Done.
func (e *Electd) Exit() int {
	if e.State() == nil {
		e.t.Errorf("%s: no exit status: %v", e.ID, e.Err())
	}
	return e.ExitCode()
}

// WaitExit waits for electd to exit and returns its Exit; it fails the
// test if electd has not exited within.
func (e *Electd) WaitExit(within time.Duration) int {
	e.t.Helper()
	if !e.Wait(within) {
		e.t.Fatalf("%s (pid %d) has not exited after %s\n%s", e.ID, e.Pid(), within, e.Tail())
	}
	return e.Exit()
}

// Signal sends sig to electd; it fails the test if it cannot.
func (e *Electd) Signal(sig syscall.Signal) {
	e.t.Helper()
	if err := e.TrySignal(sig); err != nil {
		e.t.Fatalf("signal %s to %s: %v", sig, e.ID, err)
	}
}

// TrySignal sends sig to electd (an error once it has been reaped).
func (e *Electd) TrySignal(sig syscall.Signal) error { return e.Cmd.Process.Signal(sig) }

// Kill SIGKILLs electd (if still running) and waits until it is reaped.
func (e *Electd) Kill() {
	if !e.Exited() {
		_ = e.Cmd.Process.Kill()
	}
	<-e.Done()
}

// Output is all of electd's log so far (the error, if it cannot be read).
func (e *Electd) Output() string {
	b, err := os.ReadFile(e.LogPath)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// Crashes reports, as errors of the test, every sign in electd's log that
// it raced, panicked or died of a fatal runtime error (proc.Crashes).
func (e *Electd) Crashes() {
	e.t.Helper()
	b, err := os.ReadFile(e.LogPath)
	if err != nil {
		return
	}
	for _, bad := range proc.Crashes(string(b)) {
		e.t.Errorf("%s's output contains %q:\n%s", e.ID, bad, e.Tail())
	}
}

// Tail is the end of electd's log, for failure messages.
func (e *Electd) Tail() string { return Tail(e.ID, e.LogPath, TailLines) }

// Story is the short form of the end of electd's log (kit.Story).
func (e *Electd) Story(n int) string { return Story(e.ID, e.LogPath, n) }

// Do sends a request to electd's HTTP API, with bearer as its token if not
// empty, and returns the status code and the body.
func (e *Electd) Do(method, path, bearer string) (int, []byte, error) {
	req, err := http.NewRequest(method, "http://"+e.HTTP+path, nil)
	if err != nil {
		return 0, nil, err
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, body, err
}

// Get is Do of a GET without a token.
func (e *Electd) Get(path string) (int, []byte, error) { return e.Do(http.MethodGet, path, "") }

// LeaderDoc is the body of GET /leader, and a line of `electd leader -o
// json`.
type LeaderDoc struct {
	Election string `json:"election"`
	Leader   *struct {
		ID           string `json:"id"`
		Address      string `json:"address"`
		FencingToken uint64 `json:"fencing_token"`
		Since        string `json:"since"`
	} `json:"leader"`
	Self struct {
		ID     string `json:"id"`
		Leader bool   `json:"leader"`
	} `json:"self"`
}

// Leader asks electd's /leader; code is the HTTP status.
func (e *Electd) Leader() (d LeaderDoc, code int, err error) {
	code, body, err := e.Get("/leader")
	if err != nil {
		return d, 0, err
	}
	if err := json.Unmarshal(body, &d); err != nil {
		return d, code, fmt.Errorf("/leader %d: %w: %s", code, err, body)
	}
	return d, code, nil
}

// Readyz is the status code of GET /readyz (0 when it did not answer).
func (e *Electd) Readyz() int {
	code, _, err := e.Get("/readyz")
	if err != nil {
		return 0
	}
	return code
}
