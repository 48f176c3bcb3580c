package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/kube"
)

// Keys of a kubeCounts delta besides "VERB CODE" of Lease requests.
const (
	kWatchEvents = "watch events"
)

// kubeCounts is one reading of the API server's counters of Lease
// requests (apiserver_request_total with resource="leases", by verb and
// code; a watch counts when it ends), of the Lease events it sent to
// watchers (apiserver_watch_events_total), and of its CPU time.
type kubeCounts struct {
	m   map[string]float64
	cpu time.Duration
	at  time.Time
}

func (kb *kubeEnv) snap(ctx context.Context) (kubeCounts, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	raw, err := kb.admin.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return kubeCounts{}, fmt.Errorf("the API server's /metrics: %w", err)
	}
	c := kubeCounts{m: map[string]float64{}, at: time.Now()}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var watch bool
		switch {
		case strings.HasPrefix(line, "apiserver_request_total{"):
		case strings.HasPrefix(line, "apiserver_watch_events_total{"):
			watch = true
		default:
			continue
		}
		if !strings.Contains(line, `resource="leases"`) && !strings.Contains(line, `kind="Lease"`) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			continue
		}
		if watch {
			c.m[kWatchEvents] += v
			continue
		}
		c.m[label(line, "verb")+" "+label(line, "code")] += v
	}
	if pid := kb.k.Pid(); pid > 0 {
		if cpu, _, _, err := procStat(pid); err == nil {
			c.cpu = cpu
		}
	}
	return c, nil
}

// kubeRate is a delta of kubeCounts per minute.
type kubeRate struct {
	m   map[string]float64 // per minute
	cpu float64            // the API server's CPU, share of one core
	dur time.Duration
}

func rateOf(a, b kubeCounts) kubeRate {
	d := b.at.Sub(a.at)
	r := kubeRate{m: map[string]float64{}, dur: d}
	for k, v := range diffMap(a.m, b.m) {
		r.m[k] = v / d.Minutes()
	}
	r.cpu = float64(b.cpu-a.cpu) / float64(d)
	return r
}

// minus is r − base, scaled by 1/n.
func (r kubeRate) minus(base kubeRate, n float64) map[string]float64 {
	out := map[string]float64{}
	for _, k := range keys(r.m, base.m) {
		out[k] = (r.m[k] - base.m[k]) / n
	}
	return out
}

// requests sums the request keys of a delta (not the watch events).
func requests(d map[string]float64) float64 {
	return sumMap(d, func(k string) bool { return k == kWatchEvents })
}

// byVerb renders the requests of a delta by verb (codes other than 2xx
// named), largest first, and the watch events.
func byVerb(d map[string]float64, prec int) string {
	type kv struct {
		k string
		v float64
	}
	var s []kv
	for k, v := range d {
		if k == kWatchEvents || math.Abs(v) < 0.05 {
			continue
		}
		verb, code, _ := strings.Cut(k, " ")
		if strings.HasPrefix(code, "2") {
			k = verb
		}
		s = append(s, kv{k, v})
	}
	merged := map[string]float64{}
	for _, x := range s {
		merged[x.k] += x.v
	}
	s = s[:0]
	for k, v := range merged {
		s = append(s, kv{k, v})
	}
	sort.Slice(s, func(i, j int) bool { return s[i].v > s[j].v || s[i].v == s[j].v && s[i].k < s[j].k })
	var parts []string
	for _, x := range s {
		parts = append(parts, x.k+" "+num(x.v, prec))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// num renders v with prec decimals, without a minus sign on a zero.
func num(v float64, prec int) string {
	s := strconv.FormatFloat(v, 'f', prec, 64)
	if strings.Trim(s, "-0.") == "" {
		return strings.TrimPrefix(s, "-")
	}
	return s
}

// stallNote names the changes that took over a second.
func stallNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d of %d changes over 1 s)", n, scaleChanges)
}

// kubeHold is how long each leader of the per-change figures holds its
// term before it resigns.
const kubeHold = 200 * time.Millisecond

// roundUp rounds d up to a whole number of units.
func roundUp(d, unit time.Duration) time.Duration {
	return (d + unit - 1) / unit * unit
}

// kubeWindow sleeps d and returns the rates over it.
func (kb *kubeEnv) window(ctx context.Context, d time.Duration) (kubeRate, error) {
	a, err := kb.snap(ctx)
	if err != nil {
		return kubeRate{}, err
	}
	sleepCtx(ctx, d)
	if ctx.Err() != nil {
		return kubeRate{}, ctx.Err()
	}
	b, err := kb.snap(ctx)
	if err != nil {
		return kubeRate{}, err
	}
	return rateOf(a, b), nil
}

// idleElectd measures electd's idle followers of election (kubeIdle,
// zkIdle): a leader (start), once it leads and settle has passed, alone
// for a window (base), then with n followers, each queued before the next
// starts, for a window after settle (with). The nodes are killed on
// return.
func idleElectd[R any](ctx context.Context, b *backend, election string, n int, settle time.Duration, start func(id string) (*node, error), window func() (R, error)) (base, with R, err error) {
	lead, err := start("leader")
	if err != nil {
		return base, with, err
	}
	defer lead.kill()
	if err := waitUntil(ctx, 30*time.Second, lead.isLeader); err != nil {
		return base, with, fmt.Errorf("electd idle leader did not lead: %w", err)
	}
	sleepCtx(ctx, settle)
	if base, err = window(); err != nil {
		return base, with, err
	}
	for i := range n {
		f, err := start(fmt.Sprintf("follower%d", i+1))
		if err != nil {
			return base, with, err
		}
		defer f.kill()
		if err := waitUntil(ctx, 30*time.Second, func() bool {
			q, err := b.queued(ctx, election)
			d, _, lerr := f.leader()
			return err == nil && q == i+2 && lerr == nil && d.Leader != nil
		}); err != nil {
			return base, with, fmt.Errorf("electd idle follower%d not queued: %w", i+1, err)
		}
	}
	sleepCtx(ctx, settle)
	with, err = window()
	return base, with, err
}

// kubeIdle: 4. the requests of an idle follower, at the API server: per
// tool, a leader alone for a window (the baseline), then the leader and
// kubeIdleN followers for a window; each follower's rate is the
// difference over kubeIdleN. electd: `electd run --ttl 15s -- sleep`
// processes; client-go: the program at its default timing.
func (e *env) kubeIdle(ctx context.Context, kb *kubeEnv, b *backend) error {
	// Whole ticket-renewal intervals of electd's followers (TTL/3 = 5 s):
	// each follower renews the same number of times in every window.
	win := roundUp(e.cfg.idleWindow/2, kubeLongTTL/3)
	const settle = 5 * time.Second
	type result struct {
		base, with kubeRate
	}
	var ed, cg result

	// electd.
	err := func() error {
		const election = "k8s-idle"
		start := func(id string) (*node, error) {
			return e.startNode(ctx, nodeSpec{election: election, id: id, store: b.url, dir: e.dir, ttl: kubeLongTTL,
				env: []string{"KUBECONFIG=" + kb.direct}, command: []string{e.sleepBin, "86400"}})
		}
		var err error
		ed.base, ed.with, err = idleElectd(ctx, b, election, kubeIdleN, settle, start, func() (kubeRate, error) { return kb.window(ctx, win) })
		return err
	}()
	if err != nil {
		return fmt.Errorf("electd: %w", err)
	}

	// client-go.
	err = func() error {
		const name = "cg-idle"
		lead, err := kb.startGo(name, "leader", kubeLongTTL, true, "")
		if err != nil {
			return err
		}
		defer lead.kill()
		if _, err := lead.wait(ctx, "started", 2*kubeLongTTL+10*time.Second); err != nil {
			return err
		}
		sleepCtx(ctx, settle)
		if cg.base, err = kb.window(ctx, win); err != nil {
			return err
		}
		for i := range kubeIdleN {
			g, err := kb.startGo(name, fmt.Sprintf("follower%d", i+1), kubeLongTTL, true, "")
			if err != nil {
				return err
			}
			defer g.kill()
			if _, err := g.wait(ctx, "acquiring", 10*time.Second); err != nil {
				return err
			}
		}
		sleepCtx(ctx, settle)
		cg.with, err = kb.window(ctx, win)
		return err
	}()
	if err != nil {
		return fmt.Errorf("client-go: %w", err)
	}

	n := float64(kubeIdleN)
	edPer, cgPer := ed.with.minus(ed.base, n), cg.with.minus(cg.base, n)
	edReq, cgReq := requests(edPer), requests(cgPer)
	fig := fmt.Sprintf("4. idle follower (%d followers, one leader): Lease requests a minute at the API server, each", kubeIdleN)
	e.rep.add(kubeSec, fmt.Sprintf("electd, k8s, --ttl %s", kubeLongTTL), fig,
		fmt.Sprintf("%s (%s); and %s Lease watch events sent", num(edReq, 1), byVerb(edPer, 1), num(edPer[kWatchEvents], 0)),
		"< client-go's", verdict(edReq < cgReq))
	e.rep.add(kubeSec, cgSubject(true, fmt.Sprintf("lease %s, RetryPeriod 2s", kubeLongTTL)), fig,
		fmt.Sprintf("%s (%s); and %s Lease watch events sent", num(cgReq, 1), byVerb(cgPer, 1), num(cgPer[kWatchEvents], 0)), "(peer)", "")
	e.rep.note(kubeSec, "4: per tool, the leader alone for %s (baseline), then the leader and %d followers (after %s to settle) for %s; a follower's rate is (window − baseline) / %d, from the API server's apiserver_request_total{resource=\"leases\"} by verb (PUT is an update, POST a create; a watch counts only when it ends) and apiserver_watch_events_total for Leases (events the server sent to watchers). The baseline includes the API server's own Lease renewals (its identity Lease in kube-system). electd's follower renews its ticket (a Lease of its own) every TTL/3 = 5 s, and watches the election's Lease and the line of tickets: every ticket renewal is sent to every candidate's watch of the line, so a follower's watch events grow with the number of candidates. client-go's follower GETs the Lease every RetryPeriod (2 s) plus up to 1.2× jitter. API server CPU: electd %.1f %% of a core with the leader alone, %.1f %% with %d followers; client-go %.1f %%, %.1f %%.",
		win.Round(time.Second), kubeIdleN, settle, win.Round(time.Second), kubeIdleN,
		100*ed.base.cpu, 100*ed.with.cpu, kubeIdleN, 100*cg.base.cpu, 100*cg.with.cpu)
	e.rep.note(kubeSec, "4, the leaders alone, requests a minute (baseline, API server's own included): electd %s; client-go %s.", byVerb(ed.base.m, 1), byVerb(cg.base.m, 1))
	logf("k8s idle: electd follower %.1f/min (%s), client-go follower %.1f/min (%s)", edReq, byVerb(edPer, 1), cgReq, byVerb(cgPer, 1))
	return nil
}

// changeSeries is one election of in-process candidates, each in a loop:
// lead, wait to be told to resign, resign, campaign again at once.
type changeSeries struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	won    chan winner
	errs   chan error
	cands  []*cand
	closeF []func()

	mu     sync.Mutex
	leader string // the id of the latest winner
}

func (s *changeSeries) setLeader(id string) {
	s.mu.Lock()
	s.leader = id
	s.mu.Unlock()
}

func (s *changeSeries) leaderID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leader
}

func newChangeSeries(parent context.Context) *changeSeries {
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	return &changeSeries{ctx: ctx, cancel: cancel, won: make(chan winner, 1024), errs: make(chan error, 1024)}
}

func (s *changeSeries) close() {
	s.cancel()
	eachAtMost(32, s.closeF, func(f func()) { f() })
	s.wg.Wait()
}

// firstLeader waits up to within for the series' first leader.
func (s *changeSeries) firstLeader(ctx context.Context, within time.Duration) (*cand, error) {
	select {
	case w := <-s.won:
		return w.c, nil
	case err := <-s.errs:
		return nil, err
	case <-time.After(within):
		return nil, fmt.Errorf("no leader")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// changes has the leader (cur first) resign scaleChanges times, each
// after kubeHold, among n candidates of timeout ttl, and returns each
// handover's time from the resign to the successor's grant; won (if not
// nil) sees each successor with that time.
func (s *changeSeries) changes(ctx context.Context, cur *cand, n int, ttl time.Duration, won func(w winner, d time.Duration)) ([]time.Duration, error) {
	var lat []time.Duration
	for range scaleChanges {
		sleepCtx(ctx, kubeHold)
		sent := time.Now()
		cur.resign <- struct{}{}
		select {
		case w := <-s.won:
			if w.c == cur {
				return lat, fmt.Errorf("N=%d: the resigned leader won again", n)
			}
			cur = w.c
			lat = append(lat, w.at.Sub(sent))
			if won != nil {
				won(w, w.at.Sub(sent))
			}
		case err := <-s.errs:
			return lat, err
		case <-time.After(2*ttl + 10*time.Second):
			return lat, fmt.Errorf("N=%d: no successor within %s", n, 2*ttl+10*time.Second)
		case <-ctx.Done():
			return lat, ctx.Err()
		}
	}
	return lat, nil
}

// addElectd adds an in-process electd candidate (elector/kube, on the
// client electd builds: kube.Clients), run as addLocker runs any.
func (s *changeSeries) addElectd(c *cand, leases func() (*kube.Elector, error)) error {
	el, err := leases()
	if err != nil {
		return err
	}
	s.addLocker(c, el, func() { _ = el.Close() })
	return nil
}

// addGo adds an in-process client-go candidate: a LeaderElector with
// ReleaseOnCancel run until it leads and is told to resign (its context
// cancelled: it releases), then a new one at once.
func (s *changeSeries) addGo(c *cand, cs *kubernetes.Clientset, name string) {
	s.cands = append(s.cands, c)
	renew, retry := cgTiming(kubeLongTTL)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for s.ctx.Err() == nil {
			rctx, cancel := context.WithCancel(s.ctx)
			led := make(chan struct{}, 1)
			le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
				Lock: &resourcelock.LeaseLock{
					LeaseMeta:  metav1.ObjectMeta{Name: name, Namespace: kubeNS},
					Client:     cs.CoordinationV1(),
					LockConfig: resourcelock.ResourceLockConfig{Identity: c.id},
				},
				LeaseDuration: kubeLongTTL, RenewDeadline: renew, RetryPeriod: retry, ReleaseOnCancel: true, Name: c.id,
				Callbacks: leaderelection.LeaderCallbacks{
					OnStartedLeading: func(context.Context) {
						s.setLeader(c.id)
						s.won <- winner{c: c, at: time.Now()}
						led <- struct{}{}
					},
					OnStoppedLeading: func() {},
				},
			})
			if err != nil {
				cancel()
				s.errs <- err
				return
			}
			done := make(chan struct{})
			go func() { defer close(done); le.Run(rctx) }()
			select {
			case <-led:
				select {
				case <-c.resign:
				case <-done:
					if s.ctx.Err() == nil {
						s.errs <- fmt.Errorf("%s: lost the Lease", c.id)
					}
				case <-s.ctx.Done():
				}
			case <-done:
			case <-s.ctx.Done():
			}
			cancel()
			<-done
			// A released Lease is free for whoever polls first, and a new
			// LeaderElector polls at once: rejoining now would take it
			// back. Rejoin once the next leader has started.
			for s.ctx.Err() == nil && s.leaderID() == c.id {
				sleepCtx(s.ctx, 5*time.Millisecond)
			}
		}
	}()
}

// quietKlog silences client-go's log (klog) in this process: the
// in-process electors log every acquisition.
func quietKlog() {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
}

// kubeChanges: 5. requests per leader change with N candidates, in
// process: electd's electors (elector/kube on the client electd builds)
// and client-go LeaderElectors (ReleaseOnCancel on, default timing), each
// tool's N candidates on one shared client, on an election of their own.
func (e *env) kubeChanges(ctx context.Context, kb *kubeEnv) error {
	quietKlog()
	rc := kb.k.Config(kb.token)
	leases, _, err := kube.Clients(rc)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	// Whole ticket-renewal intervals (TTL/3 = 5 s), for the idle window
	// and the window of the changes alike: electd's waiters renew their
	// tickets together (they joined together), so a window that is not a
	// whole number of intervals counts a burst of renewals, or none.
	tick := kubeLongTTL / 3
	idleWin := 3 * tick
	if e.cfg.idleWindow < time.Minute {
		idleWin = tick
	}
	type res struct{ per, idle float64 }
	results := map[string]map[int]res{"electd": {}, "client-go": {}}
	for _, tool := range []string{"electd", "client-go"} {
		for _, n := range kubeChangeNs {
			name := fmt.Sprintf("%s-changes-%d", map[string]string{"electd": "k8s", "client-go": "cg"}[tool], n)
			s := newChangeSeries(ctx)
			err := func() error {
				defer s.close()
				logFile, err := os.Create(filepath.Join(e.dir, name+".log"))
				if err != nil {
					return err
				}
				defer logFile.Close()
				log := slog.New(slog.NewJSONHandler(logFile, nil))
				// The candidates join one by one over a ticket-renewal
				// interval, as processes started at different moments
				// would, so that electd's waiters renew their tickets
				// spread over it rather than in one burst.
				for i := range n {
					if i > 0 {
						sleepCtx(ctx, tick/time.Duration(n))
					}
					c := &cand{id: fmt.Sprintf("c%03d", i+1), resign: make(chan struct{}, 1)}
					if tool == "electd" {
						if err := s.addElectd(c, func() (*kube.Elector, error) {
							return kube.New(kube.Config{Candidate: elector.Candidate{Election: name, ID: c.id, Timing: elector.Timing{TTL: kubeLongTTL}, Logger: log},
								Leases: leases, Namespace: kubeNS})
						}); err != nil {
							return err
						}
					} else {
						s.addGo(c, cs, name)
					}
				}
				cur, err := s.firstLeader(ctx, 2*kubeLongTTL+30*time.Second)
				if err != nil {
					return err
				}
				if tool == "electd" {
					if err := waitUntil(ctx, 60*time.Second, func() bool {
						q, err := kb.queued(ctx, name)
						return err == nil && q == n
					}); err != nil {
						return fmt.Errorf("%d candidates not queued: %w", n, err)
					}
				}
				sleepCtx(ctx, 5*time.Second) // joining settles (a ticket's first renewal comes at once)
				idle, err := kb.window(ctx, idleWin)
				if err != nil {
					return err
				}
				a, err := kb.snap(ctx)
				if err != nil {
					return err
				}
				stalls := 0
				lat, err := s.changes(ctx, cur, n, kubeLongTTL, func(w winner, d time.Duration) {
					if d > time.Second {
						stalls++
						logf("k8s changes %s N=%d: %s led %s after the resign", tool, n, w.c.id, d.Round(time.Millisecond))
					}
				})
				if err != nil {
					return err
				}
				// The last rejoin, and the window up to whole intervals.
				sleepCtx(ctx, max(200*time.Millisecond, roundUp(time.Since(a.at)+200*time.Millisecond, tick)-time.Since(a.at)))
				b, err := kb.snap(ctx)
				if err != nil {
					return err
				}
				chg := rateOf(a, b)
				// Per change: (requests in the window − the idle rate × its
				// length) / changes.
				per := map[string]float64{}
				for _, k := range keys(chg.m, idle.m) {
					per[k] = (chg.m[k] - idle.m[k]) * chg.dur.Minutes() / scaleChanges
				}
				r := res{per: requests(per), idle: requests(idle.m)}
				results[tool][n] = r
				subj := fmt.Sprintf("electd, k8s, --ttl %s, in process", kubeLongTTL)
				if tool == "client-go" {
					subj = cgSubject(true, fmt.Sprintf("lease %s, in process", kubeLongTTL))
				}
				e.rep.add(kubeSec, subj, fmt.Sprintf("5. N = %d candidates: Lease requests per leader change", n),
					fmt.Sprintf("%s (%s); %s watch events; handover %s%s", num(r.per, 1), byVerb(per, 1), num(per[kWatchEvents], 0), summarize(lat).short(), stallNote(stalls)), "", "")
				e.rep.add(kubeSec, subj, fmt.Sprintf("5. N = %d candidates: idle, the whole election: Lease requests a minute (API server CPU)", n),
					fmt.Sprintf("%s (%s); %s watch events a minute; API server %.0f %% of a core", num(r.idle, 0), byVerb(idle.m, 0), num(idle.m[kWatchEvents], 0), 100*idle.cpu), "", "")
				logf("k8s changes %s N=%d: per change %.1f (%s); idle %.0f/min; handover %s", tool, n, r.per, byVerb(per, 1), r.idle, summarize(lat).short())
				return nil
			}()
			if err != nil {
				e.rep.failed(fmt.Sprintf("k8s per change %s N=%d", tool, n), err)
			}
		}
	}
	if lo, ok1 := results["electd"][10]; ok1 {
		if hi, ok2 := results["electd"][100]; ok2 {
			e.rep.add(kubeSec, fmt.Sprintf("electd, k8s, --ttl %s, in process", kubeLongTTL), "5. per leader change, N = 100 vs N = 10",
				fmt.Sprintf("%.1f vs %.1f", hi.per, lo.per), "independent of N", verdict(hi.per <= 1.5*lo.per+2))
		}
	}
	e.rep.note(kubeSec, "5: in-process candidates (not processes, to keep the machine alive at N = 100): electd's electors from elector/kube on the client electd builds (kube.Clients), client-go's LeaderElectors on a LeaseLock (ReleaseOnCancel on, lease %s, default timing, client-go's log silenced); each tool's N candidates share one client (one HTTP/2 connection), as the service account, and join one by one over %s. %d leader changes per N: each leader holds its term for %s, then resigns (electd: Term.Resign; client-go: its Run's context cancelled, so it releases) and campaigns again (electd: at once, a new ticket at the back of the line; client-go: a new LeaderElector once the next leader has started, since one started at once would poll first and take the released Lease back). Per change = (requests in the window − the idle rate measured over %s just before × the window's length) / %d, both windows whole ticket-renewal intervals of electd (%s): the periodic requests (electd's ticket renewals, client-go's polling) go on through the window and are subtracted, so the figure is noisy at N = 100. Handover: resign call → the next leader's Campaign return or OnStartedLeading.",
		kubeLongTTL, tick, scaleChanges, kubeHold, idleWin, scaleChanges, tick)
	return nil
}
