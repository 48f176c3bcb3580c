package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/internal/deathsig"
	"github.com/electd/electd/internal/testenv"
	"github.com/electd/electd/test/kit"
	"github.com/electd/electd/test/proc"
)

const (
	ttl           = 2 * time.Second
	renewInterval = ttl / 5 // electd's default
	stopTimeout   = 500 * time.Millisecond
	coolDown      = 200 * time.Millisecond

	startTimeout = 15 * time.Second // electd start to /livez
	exitTimeout  = 10 * time.Second // signal to exit
	logTailLines = 80               // of an electd's stderr, on failure
)

// node is one `electd run` process.
type node struct {
	t                 *testing.T
	id                string
	http              string // host:port of its HTTP API
	logPath           string // its stdout and stderr (and its child's)
	*deathsig.Process        // electd; nil until started
	client            *http.Client
}

// nodeOpts are the per-process differences.
type nodeOpts struct {
	store string   // --store URL; empty: none (env must carry ELECTD_STORE)
	args  []string // more flags before `--`
	env   []string // more environment (RECORD_* knobs, ELECTD_*)
	// pidNamespace runs electd as PID 1 of a new PID namespace, as in a
	// container whose entrypoint it is (needs root).
	pidNamespace bool
}

// startNode starts `electd run` with the harness's election and record log
// and waits until /livez answers 200. It is SIGKILLed in t.Cleanup.
func (h *harness) startNode(id string, o nodeOpts) *node {
	h.t.Helper()
	for try := 1; ; try++ {
		n, err := h.tryStart(id, o)
		if err == nil {
			return n
		}
		if !strings.Contains(err.Error(), "address already in use") || try == 3 {
			h.t.Fatalf("start %s: %v", id, err)
		}
		h.t.Logf("start %s: %v; retrying on another port", id, err)
	}
}

func (h *harness) tryStart(id string, o nodeOpts) (*node, error) {
	t := h.t
	n := &node{
		t: t, id: id,
		http:    "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t)),
		logPath: filepath.Join(h.dir, fmt.Sprintf("%s-%d.log", id, len(h.nodes))),
		client:  &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}},
	}
	args := []string{"run", "--election", h.election, "--id", id, "--ttl", ttl.String(),
		"--stop-timeout", stopTimeout.String(), "--listen", n.http, "--cool-down", coolDown.String(),
		"--log-format", "json", "--log-level", "debug"}
	if o.store != "" {
		args = append(args, "--store", o.store)
	}
	args = append(append(args, o.args...), "--", bin.Recorder)
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin.Electd, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(proc.BaseEnv("RECORD_LOG="+h.logPath), o.env...)
	if o.pidNamespace {
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	}
	if n.Process, err = deathsig.Start(cmd); err != nil { // dies with the test
		return nil, err
	}
	h.nodes = append(h.nodes, n)
	deadline := time.Now().Add(startTimeout)
	for {
		if code, _, err := n.get("/livez"); err == nil && code == http.StatusOK {
			return n, nil
		}
		select {
		case <-n.Done():
			return nil, fmt.Errorf("electd exited with %d before /livez answered:\n%s", n.exitCode(), n.tail())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("/livez not 200 after %s:\n%s", startTimeout, n.tail())
		}
	}
}

// exitCode is the shell's view of the exit: the code, or 128+signal. Only
// after Done.
func (n *node) exitCode() int {
	if n.State() == nil {
		n.t.Errorf("%s: no exit status: %v", n.id, n.Err())
	}
	return n.ExitCode()
}

// wait waits for electd to exit and returns its exit code.
func (n *node) wait(within time.Duration) int {
	n.t.Helper()
	select {
	case <-n.Done():
		return n.exitCode()
	case <-time.After(within):
		n.t.Fatalf("%s (pid %d) has not exited after %s", n.id, n.Pid(), within)
		return -1
	}
}

func (n *node) signal(sig syscall.Signal) {
	n.t.Helper()
	if err := n.Cmd.Process.Signal(sig); err != nil {
		n.t.Fatalf("signal %s to %s: %v", sig, n.id, err)
	}
}

// kill SIGKILLs electd (if still running) and waits until it is reaped.
func (n *node) kill() {
	if !n.Exited() {
		_ = n.Cmd.Process.Kill()
	}
	<-n.Done()
}

// tail is the end of the node's log, for failure messages.
func (n *node) tail() string { return kit.Tail(n.id, n.logPath, logTailLines) }

func (n *node) do(method, path, bearer string) (int, []byte, error) {
	req, err := http.NewRequest(method, "http://"+n.http+path, nil)
	if err != nil {
		return 0, nil, err
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := n.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, body, err
}

func (n *node) get(path string) (int, []byte, error) { return n.do(http.MethodGet, path, "") }

// leaderDoc is the body of GET /leader.
type leaderDoc struct {
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

// leader asks the node's /leader; code is the HTTP status.
func (n *node) leader() (leaderDoc, int, error) {
	var d leaderDoc
	code, body, err := n.get("/leader")
	if err != nil {
		return d, 0, err
	}
	if err := json.Unmarshal(body, &d); err != nil {
		return d, code, fmt.Errorf("/leader: %w: %s", err, body)
	}
	return d, code, nil
}

// readyz is the status code of GET /readyz (0 when it did not answer).
func (n *node) readyz() int {
	code, _, err := n.get("/readyz")
	if err != nil {
		return 0
	}
	return code
}
