// Package hook runs `electd run --on-change CMD`: a command line, through
// /bin/sh -c as keepalived's notify scripts and Patroni's callbacks are,
// at every change of this copy's role (leading, following, waiting,
// stopped), with the role, the election, the leader and its fencing token
// in its environment.
//
// Hooks are told, never asked: Notify does not block, so the stop of the
// child and the resignation never wait for one. One goroutine (Run) runs
// them one at a time in the order of the changes; changes that come while
// a hook runs are coalesced, and the next hook gets the latest, so a hook
// never sees an older role after a newer one. Each runs under a timeout,
// in a session and process group of its own beside the child's tree (see
// supervisor.StartAside), and what is left of that group when it exits or
// times out is killed.
package hook

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/electd/electd/clock"
	"github.com/electd/electd/supervisor"
)

// The roles a hook is told.
const (
	Leading   = "leading"   // this copy holds a term (ELECTD_FENCING_TOKEN is its token)
	Following = "following" // another copy leads (ELECTD_LEADER_ID, its token)
	Waiting   = "waiting"   // no leader this copy knows of: none, or the store cannot be reached
	Stopped   = "stopped"   // electd stops: the child is stopped and the term given up
)

// Change is a role of this copy, with the leader it names: this copy's id
// and its term's token when leading, the other's when following, none
// when waiting or stopped.
type Change struct {
	Role     string
	LeaderID string
	Token    uint64
}

// DefaultTimeout is --on-change-timeout's default.
const DefaultTimeout = 30 * time.Second

// Config says what to run and how.
type Config struct {
	Command  string        // a command line, run with /bin/sh -c
	Timeout  time.Duration // then SIGKILL to the hook's process group
	Election string
	ID       string   // this copy's id (ELECTD_ID)
	Env      []string // the environment the hook's own variables are added to
	Output   *os.File // the hook's stdout and stderr (nil: os.Stderr)
	Logger   *slog.Logger
	Clock    clock.Clock // for the timeout (nil: the real one)
	// Registerer gets electd_hook_runs_total{result} (nil: not registered).
	Registerer prometheus.Registerer
}

// Results of a run, the metric's result label.
const (
	resultOK      = "ok"       // exit 0
	resultFailed  = "failed"   // a non-zero exit or a signal
	resultTimeout = "timeout"  // killed after Timeout
	resultNoStart = "no_start" // could not be started
)

// Runner runs the hooks of one copy; Notify tells it of each change, Run
// runs them.
type Runner struct {
	cfg  Config
	runs *prometheus.CounterVec

	wake chan struct{} // a value when pending is set

	mu        sync.Mutex
	pending   *Change // the latest change not yet run
	coalesced int     // changes replaced in pending since the last run
	last      *Change // the change of the last run (ELECTD_PREVIOUS_ROLE)
	running   int     // the pid of the hook that runs (0: none)
	hurried   bool    // Hurry was called: no hook runs any more
}

// New returns a Runner for cfg.
func New(cfg Config) (*Runner, error) {
	if cfg.Command == "" || cfg.Timeout <= 0 {
		return nil, fmt.Errorf("hook: a command and a positive timeout are needed, got %q and %s", cfg.Command, cfg.Timeout)
	}
	if cfg.Output == nil {
		cfg.Output = os.Stderr
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Clock = clock.OrReal(cfg.Clock)
	r := &Runner{cfg: cfg, wake: make(chan struct{}, 1),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "electd", Name: "hook_runs_total", ConstLabels: prometheus.Labels{"election": cfg.Election},
			Help: "Runs of the --on-change hook by result: ok, failed (non-zero exit or signal), timeout (killed), no_start.",
		}, []string{"result"})}
	for _, res := range []string{resultOK, resultFailed, resultTimeout, resultNoStart} {
		r.runs.WithLabelValues(res)
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(r.runs); err != nil {
			return nil, fmt.Errorf("hook: register metrics: %w", err)
		}
	}
	return r, nil
}

// Notify queues c for the next hook and returns at once: a change not yet
// run is replaced by c (coalesced). A c that says what the last hook run
// was told drops the change queued since, if any: the hook knows c.
func (r *Runner) Notify(c Change) {
	r.mu.Lock()
	switch {
	case r.pending != nil && *r.pending == c:
	case r.last != nil && *r.last == c:
		r.pending, r.coalesced = nil, 0
	default:
		if r.pending != nil {
			r.coalesced++
		}
		r.pending = &c
	}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Hurry kills the hook that runs, if one does, with its process group,
// and has no other hook run: electd was asked to stop at once (a second
// SIGINT).
func (r *Runner) Hurry() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hurried = true
	if r.running != 0 {
		if err := supervisor.KillAside(r.running); err != nil {
			r.cfg.Logger.Warn("hook: kill its process group", "pid", r.running, "err", err)
		}
	}
}

// setRunning records pid as the hook that runs (0: none), and reports
// whether electd hurries (then the caller kills it).
func (r *Runner) setRunning(pid int) (hurried bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running = pid
	return r.hurried
}

// Run runs a hook for each change until ctx ends, then for the change
// still queued, if there is one (electd's last, stopped), and returns nil.
// A hook that runs when ctx ends is waited for, up to its timeout. End ctx
// only once the last change is queued.
func (r *Runner) Run(ctx context.Context) error {
	for {
		if c, prev, skipped, ok := r.take(); ok {
			r.run(c, prev, skipped)
			continue
		}
		select {
		case <-ctx.Done():
			// A change queued since the look above (the last, stopped,
			// queued as ctx ended) is run all the same: select picks
			// either ready case.
			if c, prev, skipped, ok := r.take(); ok {
				r.run(c, prev, skipped)
			}
			return nil
		case <-r.wake:
		}
	}
}

// take returns the queued change, the previous one run, and how many
// changes were coalesced into it.
func (r *Runner) take() (c Change, prev string, skipped int, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending == nil {
		return Change{}, "", 0, false
	}
	c, skipped = *r.pending, r.coalesced
	if r.last != nil {
		prev = r.last.Role
	}
	r.pending, r.coalesced, r.last = nil, 0, &c
	return c, prev, skipped, true
}

// env is the hook's environment for c.
func (r *Runner) env(c Change, prev string) []string {
	token := ""
	if c.Token != 0 {
		token = strconv.FormatUint(c.Token, 10)
	}
	return append(append([]string(nil), r.cfg.Env...),
		"ELECTD_ROLE="+c.Role,
		"ELECTD_PREVIOUS_ROLE="+prev,
		"ELECTD_ELECTION="+r.cfg.Election,
		"ELECTD_ID="+r.cfg.ID,
		"ELECTD_LEADER_ID="+c.LeaderID,
		"ELECTD_FENCING_TOKEN="+token,
	)
}

// run runs the hook for c to its end or its timeout, and logs and counts
// the result.
func (r *Runner) run(c Change, prev string, skipped int) {
	log := r.cfg.Logger.With("hook", "on-change", "role", c.Role, "previous_role", prev)
	if skipped > 0 {
		log = log.With("coalesced", skipped)
	}
	if r.setRunning(0) {
		log.Warn("hook not run: electd stops at once (a second interrupt)")
		return
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		r.runs.WithLabelValues(resultNoStart).Inc()
		log.Warn("hook not run: open /dev/null", "err", err)
		return
	}
	defer null.Close()
	started := r.cfg.Clock.Now()
	p, err := supervisor.StartAside("/bin/sh", []string{"/bin/sh", "-c", r.cfg.Command}, &os.ProcAttr{
		Env: r.env(c, prev), Files: []*os.File{null, r.cfg.Output, r.cfg.Output},
	})
	if err != nil {
		r.runs.WithLabelValues(resultNoStart).Inc()
		log.Warn("hook not run", "err", err)
		return
	}
	log.Debug("hook started", "pid", p.Pid)
	if r.setRunning(p.Pid) { // Hurry came as it started: kill it as Hurry would have
		if err := supervisor.KillAside(p.Pid); err != nil {
			log.Warn("hook: kill its process group", "pid", p.Pid, "err", err)
		}
	}
	res, st, werr := r.wait(p)
	r.setRunning(0) // before EndAside: Hurry never kills a group that is gone
	if err := supervisor.EndAside(p.Pid); err != nil {
		log.Warn("hook: kill what is left of its process group", "err", err)
	}
	took := r.cfg.Clock.Now().Sub(started).Round(time.Millisecond)
	r.runs.WithLabelValues(res).Inc()
	switch {
	case werr != nil:
		log.Warn("hook: wait failed", "pid", p.Pid, "err", werr)
	case res == resultTimeout:
		log.Warn("hook timed out; its process group was killed (SIGKILL)", "pid", p.Pid, "timeout", r.cfg.Timeout)
	case res == resultFailed:
		log.Warn("hook failed", "pid", p.Pid, "code", st.ExitCode(), "status", st.String(), "took", took)
	default:
		log.Info("hook ran", "pid", p.Pid, "took", took)
	}
}

// wait waits for p, killing its process group at the timeout.
func (r *Runner) wait(p *os.Process) (result string, st *os.ProcessState, err error) {
	type waited struct {
		st  *os.ProcessState
		err error
	}
	done := make(chan waited, 1)
	go func() { // ends when p is reaped, which the kill below ensures
		st, err := p.Wait()
		done <- waited{st, err}
	}()
	timer := r.cfg.Clock.NewTimer(r.cfg.Timeout)
	defer timer.Stop()
	select {
	case w := <-done:
		if w.err != nil || !w.st.Success() {
			return resultFailed, w.st, w.err
		}
		return resultOK, w.st, nil
	case <-timer.C():
		if err := supervisor.KillAside(p.Pid); err != nil {
			r.cfg.Logger.Warn("hook: kill its process group at the timeout", "pid", p.Pid, "err", err)
		}
		w := <-done
		return resultTimeout, w.st, w.err
	}
}
