// Command bench measures electd against real stores and against the tools
// people use instead, in one run, and prints a table (and writes it as
// Markdown for docs/BENCHMARKS.md).
//
//	make bench        # = go run ./test/bench -md bin/bench-results.md
//
// It builds electd as production builds it (internal/release: static,
// without the embedded etcd of demo and dev, stripped) and, for its size,
// the default build; the recorder child (test/recorder),
// etcd and etcdctl (from the modules pinned in go.mod), starts its own etcd
// and redis-server processes on loopback (one pair shared by the timing
// phases, and separate ones where it counts store requests, so that nothing
// else is counted), and measures:
//
//   - graceful handover (old child's exit → new child's start) after
//     POST /resign, SIGTERM and the child exiting, on both backends; and
//     etcdctl lock (command exits) and etcdctl elect (SIGTERM);
//   - crash failover (kill -9 → new child's start) at --ttl 2s and at the
//     default 15s, against the lease bound (the new child may not start
//     before the old lease could lapse on the store: asserted), and the
//     same for etcdctl lock --ttl and etcdctl elect (60 s session);
//   - on a three-member etcd cluster (internal/testenv), electd given all
//     three members: a leader alone's requests per renewal interval and
//     its renewal latency (send → credited), then the same crash failover;
//     with -baseline REV, for electd built at REV too, side by side;
//   - the step-down margin of a leader cut off from the store;
//   - Redis Sentinel failover (kill -9 of the master, internal/testenv's
//     topology): when the old child stopped and the new one started,
//     against the old term's deadline (asserted as for crash failover);
//   - what each tool's command does when the lock is lost (measured);
//   - electd's redlock:// backend beside go-redsync/redsync v4 on the same
//     three redis-server processes: acquire on a free lock, release → next
//     holder, an idle waiter's requests, and how long a holder cut off
//     from every server runs on after another holds (phase redlock);
//   - electd's Kubernetes backend (k8s://) beside client-go's
//     leaderelection (LeaseLock, test/bench/clientgo) on one real
//     kube-apiserver (internal/testenv.StartKube): graceful handover,
//     crash failover at 2 s and 15 s leases, how long a leader cut off
//     from the API server runs on after the successor starts, an idle
//     follower's requests, and requests per leader change at N = 10 and
//     100 (phase k8s);
//   - store requests of an idle leader and follower (on etcd: the leader,
//     its head waiter, which watches the leader's lease, and a follower
//     behind that), and per leader change with 1…1000 candidates
//     (in-process), and the naive Redis lock;
//   - GET /leader throughput and p99 latency next to a bare net/http
//     handler serving the same bytes;
//   - RSS and CPU of an idle leader and follower, binary sizes.
//
// Everything it starts runs in its own process group with Pdeathsig and is
// killed on return, on error and on Ctrl-C. All traffic is on 127.0.0.1.
// Safety violations (a new child before the lease bound, two electd
// children at once) make it exit 1, after printing everything.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/electd/electd/internal/release"
	"github.com/electd/electd/internal/testenv"
)

type config struct {
	trials         int           // per figure, at short TTLs
	longTrials     int           // crash failover at the default TTL (15 s)
	electTrials    int           // etcdctl elect crash failover (60 s session)
	sentinelTrials int           // Redis Sentinel failovers at --ttl 2s (a third of them at 15s)
	idleWindow     time.Duration // store cost and footprint window
	authWindow     time.Duration // auth phase: leaders with and without etcd auth on a busy host
	loadRun        time.Duration // one GET /leader load run
	groups         int           // elections run in parallel for slow figures
	// redlock phase: acquire trials, the idle-waiter window (its baseline
	// is half as long; both whole renewal intervals of electd at --ttl 8s,
	// 1.6 s, so that no periodic step falls on an edge) and the cut-off
	// trials per tool.
	redlockTrials    int
	redlockWindow    time.Duration
	redlockCutTrials int
	only             map[string]bool
	kubeFigures      map[string]bool // -k8s-figures: the k8s phase's figures to measure (1…5); empty: all
	keep             bool
	baseline         string // -baseline: a git revision, or ""
}

func (c config) run(phase string) bool { return len(c.only) == 0 || c.only[phase] }

// env is what every phase uses.
type env struct {
	cfg  config
	root string // module root
	dir  string // temporary: logs, data, binaries

	electd, electdFull, recorder, etcdctl, etcdBin, redisBin, sleepBin string

	baseline build  // -baseline REV's electd; zero without
	treeDesc string // the tree's label beside a baseline

	etcd, redis *backend // the shared servers of the timing phases
	rep         *report
	startLoad   string // /proc/loadavg when the run began
}

func main() {
	os.Exit(mainErr())
}

func mainErr() int {
	if os.Getenv(bareEnv) != "" {
		return bareServer()
	}
	var (
		mdPath  = flag.String("md", "", "also write the results as Markdown to this file")
		quick   = flag.Bool("quick", false, "few trials and short windows (a smoke test, not a benchmark)")
		only    = flag.String("only", "", "comma-separated phases to run: long,idle,lost,scale,handover,crash,etcd-cluster,stepdown,sentinel,redlock,k8s,zk,load,auth (binary sizes always)")
		timeout = flag.Duration("timeout", 40*time.Minute, "give up after this long")
		keep    = flag.Bool("keep", false, "keep the temporary directory (logs) after the run")
		kfigs   = flag.String("k8s-figures", "", "comma-separated figures of the k8s phase to measure (1 handover, 2 crash, 3 cut-off, 4 idle, 5 per change); default all")
		base    = flag.String("baseline", "", "git revision: the etcd-cluster phase also measures electd built at it (the production build, as the tree's), side by side")
	)
	cfg := config{trials: 30, longTrials: 30, electTrials: 10, sentinelTrials: 10, idleWindow: time.Minute, authWindow: 10 * time.Minute, loadRun: 3 * time.Second, groups: 6,
		redlockTrials: 50, redlockWindow: 16 * time.Second, redlockCutTrials: 5}
	flag.IntVar(&cfg.trials, "trials", cfg.trials, "trials per figure at short TTLs")
	flag.IntVar(&cfg.longTrials, "long-trials", cfg.longTrials, "crash-failover trials at the default TTL (15s)")
	flag.IntVar(&cfg.electTrials, "elect-trials", cfg.electTrials, "etcdctl elect crash-failover trials (60s session TTL each, run in parallel)")
	flag.IntVar(&cfg.sentinelTrials, "sentinel-trials", cfg.sentinelTrials, "Redis Sentinel master kills at --ttl 2s (a third as many, at least 1, at 15s)")
	flag.IntVar(&cfg.redlockTrials, "redlock-trials", cfg.redlockTrials, "redlock phase: acquire trials per tool (release → next holder uses -trials)")
	flag.DurationVar(&cfg.idleWindow, "idle-window", cfg.idleWindow, "window for idle store cost and footprint")
	flag.DurationVar(&cfg.authWindow, "auth-window", cfg.authWindow, "auth phase: how long the leaders with and without etcd auth run on a busy host")
	flag.Parse()
	cfg.keep = *keep
	cfg.baseline = *base
	if *quick {
		cfg.trials, cfg.longTrials, cfg.electTrials, cfg.idleWindow, cfg.loadRun, cfg.groups = 5, 4, 2, 15*time.Second, time.Second, 2
		cfg.sentinelTrials = 3
		if !flagSet("auth-window") {
			cfg.authWindow = 20 * time.Second
		}
		cfg.redlockTrials, cfg.redlockWindow, cfg.redlockCutTrials = 10, 6400*time.Millisecond, 2 // whole renewal intervals (1.6 s)
	}
	if *only != "" {
		cfg.only = map[string]bool{}
		for _, p := range strings.Split(*only, ",") {
			cfg.only[strings.TrimSpace(p)] = true
		}
	}
	if *kfigs != "" {
		cfg.kubeFigures = map[string]bool{}
		for _, f := range strings.Split(*kfigs, ",") {
			cfg.kubeFigures[strings.TrimSpace(f)] = true
		}
	}
	if cfg.baseline != "" && !cfg.run("etcd-cluster") {
		fmt.Fprintln(os.Stderr, "bench: -baseline is measured by the etcd-cluster phase, which -only leaves out")
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	e := &env{cfg: cfg, rep: newReport(), startLoad: loadavg()}
	logf("load average at the start: %s", e.startLoad)
	defer procs.killAll() // also on panic in this goroutine
	started := time.Now()
	err := e.run(ctx)
	procs.killAll()
	if e.dir != "" {
		if cfg.keep || err != nil || len(e.rep.failures) > 0 || len(e.rep.violations) > 0 {
			logf("logs kept in %s", e.dir)
		} else {
			_ = os.RemoveAll(e.dir)
		}
	}
	fmt.Println()
	fmt.Printf("electd benchmark, %s; took %s\nMachine: %s\n", time.Now().Format("2006-01-02 15:04 MST"), time.Since(started).Round(time.Second), machine(e.startLoad))
	if b := e.builds(); b != "" {
		fmt.Println(b)
	}
	e.rep.text(os.Stdout)
	if *mdPath != "" {
		if werr := e.writeMarkdown(*mdPath, time.Since(started)); werr != nil {
			fmt.Fprintln(os.Stderr, "bench:", werr)
			return 1
		}
		fmt.Printf("\nMarkdown written to %s\n", *mdPath)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	if len(e.rep.violations) > 0 || len(e.rep.failures) > 0 {
		return 1
	}
	return 0
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s bench: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func (e *env) run(ctx context.Context) error {
	root, err := testenv.ModuleRoot()
	if err != nil {
		return err
	}
	e.root = root
	if e.dir, err = os.MkdirTemp("", "electd-bench-"); err != nil {
		return err
	}
	if err := e.build(ctx); err != nil {
		return err
	}
	if e.cfg.baseline != "" {
		if err := e.buildBaseline(ctx, e.cfg.baseline); err != nil {
			return err
		}
	}
	if err := e.startServers(ctx); err != nil {
		return err
	}
	e.sizes()

	// Phase A, in parallel: everything that waits out long TTLs, and the
	// one-minute idle windows (on servers of their own).
	logf("phase A: crash failover at the default TTL, etcdctl elect (60 s sessions), idle cost and footprint")
	e.parallel(ctx,
		e.phase("long", e.longFailover),
		e.phase("idle", e.idleCost),
		e.phase("lost", e.electLostLease),
		e.phase("scale", e.prepareScale),
	)
	// Timing-sensitive phases, one at a time.
	for _, ph := range []struct {
		name string
		f    func(context.Context) error
	}{
		{"handover", e.handover},
		{"crash", e.shortFailover},
		{"etcd-cluster", e.etcdClusterFailover},
		{"stepdown", e.stepDown},
		{"lost", e.lostLock},
		{"sentinel", e.sentinelFailover},
		{"redlock", e.redlockPhase},
		{"k8s", e.kubePhase},
		{"zk", e.zkPhase},
		{"scale", e.scale},
		{"load", e.leaderLoad},
		{"auth", e.authRenewals},
	} {
		if ctx.Err() != nil {
			break
		}
		if !e.cfg.run(ph.name) {
			continue
		}
		logf("phase %s", ph.name)
		if err := ph.f(ctx); err != nil {
			e.rep.failed(ph.name, err)
			logf("phase %s failed: %v", ph.name, err)
		}
	}
	return ctx.Err()
}

// phase wraps a phase for parallel: it runs only if selected and records
// its failure.
func (e *env) phase(name string, f func(context.Context) error) func(context.Context) {
	return func(ctx context.Context) {
		if !e.cfg.run(name) {
			return
		}
		if err := f(ctx); err != nil {
			e.rep.failed(name, err)
			logf("%s failed: %v", name, err)
		}
	}
}

// tried is one run of tryParallel; what names it in the report and the
// log when it fails.
type tried struct {
	what string
	run  func(ctx context.Context) error
}

// tryParallel makes each of ts in parallel, each under e.try, and returns
// when all have returned.
func (e *env) tryParallel(ctx context.Context, ts ...tried) {
	fs := make([]func(context.Context), len(ts))
	for i, tr := range ts {
		fs[i] = func(ctx context.Context) { e.try(tr.what, func() error { return tr.run(ctx) }) }
	}
	e.parallel(ctx, fs...)
}

func (e *env) parallel(ctx context.Context, fs ...func(context.Context)) {
	done := make(chan struct{}, len(fs))
	for _, f := range fs {
		go func() {
			defer func() { done <- struct{}{} }()
			f(ctx)
		}()
	}
	for range fs {
		<-done
	}
}

// build compiles every binary into the temporary directory.
func (e *env) build(ctx context.Context) error {
	bin := filepath.Join(e.dir, "bin")
	e.electd = filepath.Join(bin, "electd")
	e.electdFull = filepath.Join(bin, "electd-full")
	e.recorder = filepath.Join(bin, "recorder")
	e.etcdctl = filepath.Join(bin, "etcdctl")
	e.etcdBin = filepath.Join(bin, "etcd")
	// Every phase runs the production build (internal/release, as the
	// Dockerfile makes it).
	builds := []struct {
		out  string
		args []string
		env  []string
	}{
		{e.electd, release.BuildArgs(e.electd, "./cmd/electd", ""), release.Env},
		{e.electdFull, []string{"build", "-o", e.electdFull, "./cmd/electd"}, nil},
		{e.recorder, []string{"build", "-o", e.recorder, "./test/recorder"}, nil},
		{e.etcdctl, []string{"build", "-o", e.etcdctl, "go.etcd.io/etcd/etcdctl/v3"}, nil},
		{e.etcdBin, []string{"build", "-o", e.etcdBin, "go.etcd.io/etcd/server/v3"}, nil},
	}
	for _, b := range builds {
		start := time.Now()
		cmd := exec.CommandContext(ctx, goTool(), b.args...)
		cmd.Dir = e.root
		cmd.Env = append(os.Environ(), b.env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go %s: %v\n%s", strings.Join(b.args, " "), err, out)
		}
		logf("built %s (%s)", filepath.Base(b.out), time.Since(start).Round(100*time.Millisecond))
	}
	var err error
	if e.redisBin, err = exec.LookPath("redis-server"); err != nil {
		return errors.New("redis-server not found: `apt-get install -y redis-server` (or `make redis-server`)")
	}
	if e.sleepBin, err = exec.LookPath("sleep"); err != nil {
		return err
	}
	return nil
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

func (e *env) startServers(ctx context.Context) error {
	et, err := startEtcd(ctx, e.etcdBin, e.dir, "main")
	if err != nil {
		return err
	}
	e.etcd = &backend{name: "etcd", url: "etcd://" + et.addr, etcd: et}
	rs, err := startRedis(ctx, e.redisBin, e.dir, "main")
	if err != nil {
		return err
	}
	e.redis = &backend{name: "redis", url: "redis://" + rs.addr, redis: rs}
	logf("etcd on %s, redis on %s; logs and data in %s", et.addr, rs.addr, e.dir)
	return nil
}

func (e *env) backends() []*backend { return []*backend{e.etcd, e.redis} }

// writeMarkdown writes the results with the machine and the command.
func (e *env) writeMarkdown(path string, took time.Duration) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Fprintf(f, "<!-- generated by `go run ./test/bench %s` -->\n\n", strings.Join(os.Args[1:], " "))
	fmt.Fprintf(f, "Run: %s, took %s.\n\n", time.Now().Format("2006-01-02 15:04 MST"), took.Round(time.Second))
	fmt.Fprintf(f, "Machine: %s\n", machine(e.startLoad))
	if b := e.builds(); b != "" {
		fmt.Fprintf(f, "\n%s\n", b)
	}
	e.rep.markdown(f)
	return f.Close()
}

// builds names the builds compared, if any.
func (e *env) builds() string {
	if e.baseline.bin == "" {
		return ""
	}
	return fmt.Sprintf("Builds compared in the etcd-cluster phase: %s and %s (git archive of it), both production builds (%s).", e.treeDesc, e.baseline.label, release.Command("electd", "./cmd/electd"))
}

// machine describes the host: CPUs, CPU model, kernel, Go, load.
func machine(startLoad string) string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	kernel := "unknown kernel"
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = "Linux " + strings.TrimSpace(string(b))
	}
	return fmt.Sprintf("%d CPUs (%s), %s, %s; load average (1, 5, 15 min) at the start %s, at the end %s",
		runtime.NumCPU(), model, kernel, runtime.Version(), startLoad, loadavg())
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
