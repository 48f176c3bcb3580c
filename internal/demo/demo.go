// Package demo is `electd demo`: three sidecars in one election on one
// store, a scripted series of handovers and failovers, and a check that no
// two jobs ever ran at once.
package demo

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/internal/deathsig"
	"github.com/electd/electd/store"
)

// Config is one demo run.
type Config struct {
	// Out receives the timeline and the summary.
	Out io.Writer
	// Self is the electd binary the sidecars and jobs run.
	Self string
	// Store is the store URL (the CLI starts an embedded etcd).
	Store string
	// Duration is how long the demo runs; TTL is the sidecars' lease.
	Duration, TTL time.Duration
	// Verbose shows the sidecars' logs.
	Verbose bool
}

// Run starts three `electd run` sidecars wrapping `electd demo-job` on
// cfg.Store, resigns, kill -9s and SIGTERMs the leader in turn, prints a
// timeline with measured handover and failover times, and fails if two jobs
// ever ran at once or a job outlived its sidecar.
func Run(ctx context.Context, cfg Config) error {
	d := &demo{out: cfg.Out, start: time.Now(), self: cfg.Self, store: cfg.Store, ttl: cfg.TTL, verbose: cfg.Verbose,
		jobs: map[string]*jobSpan{}, leaders: make(chan elector.Leader, 64)}
	d.say("store at %s; starting 3 sidecars (ttl %s) each wrapping `electd demo-job`", cfg.Store, d.ttl)
	st, err := store.Open(ctx, store.Options{URL: d.store}, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	obs, err := st.NewElector(elector.Candidate{Election: "demo", ID: "demo-observer", Timing: elector.Timing{TTL: d.ttl}})
	if err != nil {
		return err
	}
	defer obs.Close()

	for i := 1; i <= 3; i++ {
		if err := d.startNode(fmt.Sprintf("node-%d", i)); err != nil {
			d.stopAll()
			return err
		}
	}
	defer d.stopAll()

	var wg sync.WaitGroup
	octx, ocancel := context.WithCancel(ctx)
	wg.Add(1)
	go func() {
		defer wg.Done()
		var last elector.Leader
		for l := range obs.Observe(octx) {
			if l.SameTerm(last) {
				continue // the same term again, with the leader's own start time
			}
			last = l
			if l.IsZero() {
				d.say("leader: none")
			} else {
				d.say("leader: %s (token %d)", l.ID, l.Token)
			}
			d.leaders <- l
		}
	}()
	defer wg.Wait()
	defer ocancel()

	err = d.script(ctx, cfg.Duration)
	d.stopAll()
	d.wg.Wait()
	d.summary()
	if err != nil {
		return err
	}
	if n := d.overlaps(); n > 0 {
		return fmt.Errorf("demo: %d overlapping jobs", n)
	}
	if n := d.orphans(); n > 0 {
		return fmt.Errorf("demo: %d jobs outlived their sidecar", n)
	}
	return nil
}

type demo struct {
	out     io.Writer
	start   time.Time
	self    string
	store   string
	ttl     time.Duration
	verbose bool
	leaders chan elector.Leader

	mu      sync.Mutex
	nodes   []*demoNode
	jobs    map[string]*jobSpan // by node id + token
	wg      sync.WaitGroup      // node readers and waiters
	order   []*jobSpan
	results []string
}

type demoNode struct {
	id, http string
	cmd      *exec.Cmd
	proc     *deathsig.Process // dies with the demo, even on kill -9
	done     chan struct{}
	exitedAt time.Time
}

type jobSpan struct {
	node, token string
	pid         int
	start, stop time.Time
	orphan      bool // outlived its sidecar
}

func (d *demo) since(t time.Time) string { return fmt.Sprintf("+%6.3fs", t.Sub(d.start).Seconds()) }

func (d *demo) say(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(d.out, "%s  %s\n", d.since(time.Now()), fmt.Sprintf(format, args...))
}

func (d *demo) startNode(id string) error {
	port, err := freeLoopbackPort()
	if err != nil {
		return err
	}
	n := &demoNode{id: id, http: fmt.Sprintf("127.0.0.1:%d", port), done: make(chan struct{})}
	n.cmd = exec.Command(d.self, "run", "--store", d.store, "--election", "demo", "--id", id,
		"--ttl", d.ttl.String(), "--listen", n.http, "--cool-down", "500ms", "--log-level", "warn",
		"--", d.self, "demo-job")
	n.cmd.Env = os.Environ()
	pr, pw, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("start %s: %w", id, err)
	}
	n.cmd.Stdout = pw
	n.cmd.Stderr = io.Discard
	if d.verbose {
		n.cmd.Stderr = os.Stderr
	}
	n.proc, err = deathsig.Start(n.cmd)
	pw.Close() // the node and its job hold the write end now
	if err != nil {
		pr.Close()
		return fmt.Errorf("start %s: %w", id, err)
	}
	d.mu.Lock()
	d.nodes = append(d.nodes, n)
	d.mu.Unlock()
	d.wg.Add(2)
	go func() { // ends when every holder of the pipe (node, job) is gone
		defer d.wg.Done()
		defer pr.Close()
		d.readJobs(pr)
	}()
	go func() {
		defer d.wg.Done()
		<-n.proc.Done() // a non-zero exit is expected after kill -9
		d.mu.Lock()
		n.exitedAt = time.Now()
		var left []*jobSpan
		for _, j := range d.order {
			if j.node == id && j.stop.IsZero() {
				left = append(left, j)
			}
		}
		d.mu.Unlock()
		for _, j := range left { // a sidecar killed with -9 never reported its job's stop
			gone, at := waitGone(j.pid, 2*time.Second)
			d.mu.Lock()
			j.stop, j.orphan = at, !gone
			d.mu.Unlock()
			if !gone {
				d.say("!!! job %d of %s outlived its sidecar; killing it", j.pid, id)
				_ = syscall.Kill(j.pid, syscall.SIGKILL)
			} else {
				d.say("job on %s (token %s): gone with its sidecar", id, j.token)
			}
		}
		close(n.done)
	}()
	return nil
}

// readJobs parses "demo-job start|stop ID TOKEN UNIXNANO PID" lines.
func (d *demo) readJobs(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 6 || f[0] != "demo-job" {
			continue
		}
		ns, err1 := strconv.ParseInt(f[4], 10, 64)
		pid, err2 := strconv.Atoi(f[5])
		if err1 != nil || err2 != nil {
			continue
		}
		at := time.Unix(0, ns)
		key := f[2] + "/" + f[3]
		d.mu.Lock()
		switch f[1] {
		case "start":
			j := &jobSpan{node: f[2], token: f[3], pid: pid, start: at}
			d.jobs[key] = j
			d.order = append(d.order, j)
		case "stop":
			if j := d.jobs[key]; j != nil {
				j.stop = at
			}
		}
		d.mu.Unlock()
		d.say("job on %s (token %s): %s", f[2], f[3], f[1])
	}
}

// leaderNode waits for a leader different from prev and returns its node.
func (d *demo) nextLeader(ctx context.Context, prevToken uint64, within time.Duration) (elector.Leader, *demoNode, error) {
	timeout := time.After(within)
	for {
		select {
		case l := <-d.leaders:
			if l.IsZero() || l.Token == prevToken {
				continue
			}
			if n := d.liveNode(l.ID); n != nil {
				return l, n, nil
			}
			return l, nil, fmt.Errorf("leader %s is not a running demo node", l.ID)
		case <-timeout:
			return elector.Leader{}, nil, fmt.Errorf("no new leader within %s", within)
		case <-ctx.Done():
			return elector.Leader{}, nil, ctx.Err()
		}
	}
}

// liveNode returns the running node called id.
func (d *demo) liveNode(id string) *demoNode {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, n := range d.nodes {
		select {
		case <-n.done:
			continue
		default:
		}
		if n.id == id {
			return n
		}
	}
	return nil
}

// jobStart waits until the job with token has started.
func (d *demo) jobStart(ctx context.Context, node string, token uint64, within time.Duration) (time.Time, error) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		d.mu.Lock()
		j := d.jobs[node+"/"+strconv.FormatUint(token, 10)]
		d.mu.Unlock()
		if j != nil {
			return j.start, nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return time.Time{}, fmt.Errorf("job of %s (token %d) did not start within %s", node, token, within)
}

func (d *demo) lastStop(node, token string) time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	if j := d.jobs[node+"/"+token]; j != nil {
		return j.stop
	}
	return time.Time{}
}

// script drives the scenario: resign, kill -9, SIGTERM, in turn.
func (d *demo) script(ctx context.Context, total time.Duration) error {
	end := d.start.Add(total)
	l, n, err := d.nextLeader(ctx, 0, 30*time.Second)
	if err != nil {
		return err
	}
	if _, err := d.jobStart(ctx, n.id, l.Token, 10*time.Second); err != nil {
		return err
	}
	actions := []string{"resign", "kill -9", "SIGTERM"}
	for i := 0; ; i++ {
		// Let the leader work for a moment, then disturb it.
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(2 * time.Second):
		}
		if time.Now().Add(d.ttl + 3*time.Second).After(end) {
			return nil
		}
		action := actions[i%len(actions)]
		d.say(">>> %s the leader %s (token %d)", action, n.id, l.Token)
		at := time.Now()
		switch action {
		case "resign":
			err = resignOver(n.http)
		case "kill -9":
			err = n.cmd.Process.Signal(syscall.SIGKILL)
		case "SIGTERM":
			err = n.cmd.Process.Signal(syscall.SIGTERM)
		}
		if err != nil {
			return fmt.Errorf("%s %s: %w", action, n.id, err)
		}
		next, nn, err := d.nextLeader(ctx, l.Token, 4*d.ttl+5*time.Second)
		if err != nil {
			return fmt.Errorf("after %s: %w", action, err)
		}
		started, err := d.jobStart(ctx, nn.id, next.Token, 10*time.Second)
		if err != nil {
			return err
		}
		var line string
		if stopped := d.lastStop(n.id, strconv.FormatUint(l.Token, 10)); action != "kill -9" && !stopped.IsZero() {
			line = fmt.Sprintf("%-8s %s -> %s: old job stopped %s after the %s, new job started %s later (handover gap)",
				action, n.id, nn.id, ms(stopped.Sub(at)), action, ms(started.Sub(stopped)))
		} else {
			line = fmt.Sprintf("%-8s %s -> %s: new job started %s after the kill (lease ttl %s: never before it lapses)",
				action, n.id, nn.id, ms(started.Sub(at)), d.ttl)
		}
		d.say("%s", line)
		d.mu.Lock()
		d.results = append(d.results, line)
		d.mu.Unlock()
		if action != "resign" { // bring the stopped node back
			<-n.done
			if err := d.startNode(n.id); err != nil {
				return err
			}
			d.say("restarted %s", n.id)
		}
		l, n = next, nn
	}
}

func resignOver(addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/resign", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("POST /resign: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	return nil
}

func (d *demo) stopAll() {
	d.mu.Lock()
	nodes := append([]*demoNode(nil), d.nodes...)
	d.mu.Unlock()
	for _, n := range nodes {
		select {
		case <-n.done:
			continue
		default:
		}
		_ = n.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, n := range nodes {
		select {
		case <-n.done:
		case <-time.After(10 * time.Second):
			_ = n.cmd.Process.Kill()
			<-n.done
		}
	}
}

// overlaps counts pairs of jobs that ran at the same time.
func (d *demo) overlaps() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for i, a := range d.order {
		for _, b := range d.order[i+1:] {
			aEnd, bEnd := a.stop, b.stop
			if aEnd.IsZero() {
				aEnd = time.Now()
			}
			if bEnd.IsZero() {
				bEnd = time.Now()
			}
			if a.start.Before(bEnd) && b.start.Before(aEnd) {
				n++
			}
		}
	}
	return n
}

func (d *demo) orphans() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, j := range d.order {
		if j.orphan {
			n++
		}
	}
	return n
}

func (d *demo) summary() {
	over := d.overlaps()
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(d.out, "\nsummary: %d jobs ran, one after another; overlapping pairs: %d\n", len(d.order), over)
	for _, r := range d.results {
		fmt.Fprintf(d.out, "  %s\n", r)
	}
}

// waitGone waits until pid has exited (or is a zombie) and says when.
func waitGone(pid int, within time.Duration) (bool, time.Time) {
	deadline := time.Now().Add(within)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true, time.Now()
		}
		if i := strings.LastIndexByte(string(b), ')'); i > 0 && len(b) > i+2 && (b[i+2] == 'Z' || b[i+2] == 'X') {
			return true, time.Now()
		}
		if time.Now().After(deadline) {
			return false, time.Now()
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func ms(d time.Duration) string { return d.Round(100 * time.Microsecond).String() }

func freeLoopbackPort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
