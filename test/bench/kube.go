package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/electd/electd/elector/kube"
	"github.com/electd/electd/internal/faultproxy"
	"github.com/electd/electd/internal/testenv"
)

// The k8s phase: electd's Kubernetes Lease backend (k8s://) and client-go's
// leaderelection (LeaseLock) side by side on one real kube-apiserver
// (internal/testenv.StartKube: its own etcd, token authentication, RBAC).
const (
	kubeSec = "Kubernetes Lease beside client-go"
	// kubeNS is the namespace of every election; electd and the client-go
	// program reach it as a service account bound only to electd's
	// least-privilege Role there (testenv.LeaseVerbs).
	kubeNS = "bench"
	// kubeLongTTL is client-go's default LeaseDuration (and electd's
	// default --ttl); kubeShortTTL the short lease of the crash and cut
	// figures.
	kubeLongTTL  = 15 * time.Second
	kubeShortTTL = 2 * time.Second
	// kubeHandoverTarget and the 2.2 s client-go figure are issue 26's.
	kubeHandoverTarget = 20 * time.Millisecond
	kubeGoAnchor       = 2200 * time.Millisecond
	// kubeIdleN followers in the idle windows; kubeChangeNs the candidates
	// of the per-change figures.
	kubeIdleN = 10
)

var kubeChangeNs = []int{10, 100}

// cgTiming is client-go's RenewDeadline and RetryPeriod for a
// LeaseDuration: the defaults of the Kubernetes components (15 s, 10 s,
// 2 s) scaled to the lease.
func cgTiming(lease time.Duration) (renew, retry time.Duration) {
	return lease * 2 / 3, lease * 2 / 15
}

// kubeEnv is the phase's API server and what reaches it.
type kubeEnv struct {
	e      *env
	k      *testenv.Kube
	token  string // the service account's
	admin  *kubernetes.Clientset
	direct string // kubeconfig reaching the API server directly
	helper string // the client-go program (test/bench/clientgo)
	seq    atomic.Int64
}

// kubeconfig writes a kubeconfig reaching server (https://HOST:PORT) with
// the service account's token, and returns its path.
func (kb *kubeEnv) kubeconfig(server string) (string, error) {
	q := strconv.Quote
	content := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: bench
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: bench
  user:
    token: %s
contexts:
- name: bench
  context: {cluster: bench, user: bench, namespace: %s}
current-context: bench
`, q(server), q(kb.k.CAFile()), q(kb.token), q(kubeNS))
	path := filepath.Join(kb.e.dir, fmt.Sprintf("kubeconfig-%d", kb.seq.Add(1)))
	return path, os.WriteFile(path, []byte(content), 0o600)
}

// viaProxy is a fault proxy in front of the API server and a kubeconfig
// through it (the server's certificate names 127.0.0.1).
func (kb *kubeEnv) viaProxy() (*faultproxy.Proxy, string, error) {
	px, err := faultproxy.New(strings.TrimPrefix(kb.k.URL(), "https://"))
	if err != nil {
		return nil, "", err
	}
	cfg, err := kb.kubeconfig("https://" + px.Addr())
	if err != nil {
		_ = px.Close()
		return nil, "", err
	}
	return px, cfg, nil
}

// queued counts an electd election's tickets, and its holder when that
// has no ticket (a leader has none): the candidates in it.
func (kb *kubeEnv) queued(ctx context.Context, election string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	leases := kb.admin.CoordinationV1().Leases(kubeNS)
	name := kube.LeaseName(election)
	list, err := leases.List(ctx, metav1.ListOptions{LabelSelector: "electd.io/queue=" + name})
	if err != nil {
		return 0, err
	}
	holders := map[string]bool{}
	for _, l := range list.Items {
		if l.Spec.HolderIdentity != nil {
			holders[*l.Spec.HolderIdentity] = true
		}
	}
	n := len(list.Items)
	l, err := leases.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return 0, err
	case l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" && !holders[*l.Spec.HolderIdentity]:
		n++
	}
	return n, nil
}

// holder is the Lease's holderIdentity ("" if none, or no Lease).
func (kb *kubeEnv) holder(ctx context.Context, name string) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	l, err := kb.admin.CoordinationV1().Leases(kubeNS).Get(ctx, name, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// renewTime is the Lease's renewTime (zero if none, or no Lease).
func (kb *kubeEnv) renewTime(ctx context.Context, name string) time.Time {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	l, err := kb.admin.CoordinationV1().Leases(kubeNS).Get(ctx, name, metav1.GetOptions{})
	if err != nil || l.Spec.RenewTime == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Time
}

// goCand is one client-go program.
type goCand struct {
	id     string
	p      *proc
	events string
	log    string
}

// startGo runs the client-go program as id on Lease name, through the
// kubeconfig cfg ("": directly).
func (kb *kubeEnv) startGo(name, id string, lease time.Duration, release bool, cfg string) (*goCand, error) {
	if cfg == "" {
		cfg = kb.direct
	}
	n := kb.seq.Add(1)
	g := &goCand{id: id,
		events: filepath.Join(kb.e.dir, fmt.Sprintf("clientgo-%s-%s-%d.events", name, id, n)),
		log:    filepath.Join(kb.e.dir, fmt.Sprintf("clientgo-%s-%s-%d.log", name, id, n))}
	renew, retry := cgTiming(lease)
	args := []string{"-namespace", kubeNS, "-name", name, "-id", id, "-lease", lease.String(),
		"-renew", renew.String(), "-retry", retry.String(), "-release=" + strconv.FormatBool(release), "-events", g.events}
	p, err := procs.start("client-go "+id, kb.helper, args, startOpts{env: baseEnv("KUBECONFIG=" + cfg), log: g.log})
	if err != nil {
		return nil, err
	}
	g.p = p
	return g, nil
}

// goElection is one election of client-go programs in a trial group:
// each follower is a new program (client-go's Run is one-shot), p1, p2, …
type goElection struct {
	kb      *kubeEnv
	name    string
	lease   time.Duration
	release bool
	all     []*goCand
}

// spawn starts the election's next program.
func (ge *goElection) spawn() (*goCand, error) {
	c, err := ge.kb.startGo(ge.name, fmt.Sprintf("p%d", len(ge.all)+1), ge.lease, ge.release, "")
	if err == nil {
		ge.all = append(ge.all, c)
	}
	return c, err
}

// leader spawns the first program and waits until it leads.
func (ge *goElection) leader(ctx context.Context) (*goCand, error) {
	lead, err := ge.spawn()
	if err != nil {
		return nil, err
	}
	if _, err := lead.wait(ctx, "started", 2*ge.lease+10*time.Second); err != nil {
		return nil, err
	}
	return lead, nil
}

// follower spawns the next program and waits until it polls the Lease.
func (ge *goElection) follower(ctx context.Context) (*goCand, error) {
	next, err := ge.spawn()
	if err != nil {
		return nil, err
	}
	if _, err := next.wait(ctx, "acquiring", 10*time.Second); err != nil {
		return nil, err
	}
	return next, nil
}

// close kills every program the election started.
func (ge *goElection) close() {
	for _, c := range ge.all {
		c.kill()
	}
}

// times returns the times of one event, in order.
func (g *goCand) times(ev string) []time.Time {
	f, err := os.Open(g.events)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []time.Time
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok || k != ev {
			continue
		}
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			out = append(out, time.Unix(0, n))
		}
	}
	return out
}

// at is the first time of an event (zero: not yet).
func (g *goCand) at(ev string) time.Time {
	if ts := g.times(ev); len(ts) > 0 {
		return ts[0]
	}
	return time.Time{}
}

// wait waits for an event and returns its time.
func (g *goCand) wait(ctx context.Context, ev string, within time.Duration) (time.Time, error) {
	var at time.Time
	err := waitUntil(ctx, within, func() bool {
		at = g.at(ev)
		return !at.IsZero()
	})
	if err != nil {
		return at, fmt.Errorf("client-go %s: no %q event within %s (exited: %v); log %s:\n%s", g.id, ev, within, g.p.Exited(), g.log, tailFile(g.log, 8))
	}
	return at, nil
}

func (g *goCand) kill() {
	if !g.p.Exited() {
		g.p.killGroup()
	}
}

// term sends SIGTERM and waits for the program to exit.
func (g *goCand) term(within time.Duration) error {
	if err := g.p.signal(syscall.SIGTERM); err != nil {
		return err
	}
	if !g.p.Wait(within) {
		return fmt.Errorf("client-go %s did not exit within %s of SIGTERM", g.id, within)
	}
	return nil
}

// clientGoVersion is the client-go module this program was built with.
func clientGoVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "k8s.io/client-go" {
				if d.Replace != nil {
					return d.Replace.Version
				}
				return d.Version
			}
		}
	}
	return "(version unknown)"
}

// cgSubject names client-go in the rows.
func cgSubject(release bool, rest string) string {
	s := "client-go leaderelection, ReleaseOnCancel " + map[bool]string{true: "on", false: "off"}[release]
	if rest != "" {
		s += ", " + rest
	}
	return s
}

// kubePhase: the Kubernetes figures, electd and client-go on one API
// server, one figure at a time (the crash and cut trials of both tools at
// once, in elections of their own).
func (e *env) kubePhase(ctx context.Context) error {
	started := time.Now()
	// testenv finds etcd by $ELECTD_ETCD_BIN first: the build every other
	// phase runs. kube-apiserver by $ELECTD_KUBE_APISERVER_BIN, else bin/.
	if err := os.Setenv("ELECTD_ETCD_BIN", e.etcdBin); err != nil {
		return err
	}
	helper := filepath.Join(e.dir, "bin", "clientgo")
	t0 := time.Now()
	cmd := exec.CommandContext(ctx, goTool(), "build", "-o", helper, "./test/bench/clientgo")
	cmd.Dir = e.root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./test/bench/clientgo: %v\n%s", err, out)
	}
	logf("built clientgo (%s)", time.Since(t0).Round(100*time.Millisecond))
	return withTB(ctx, "k8s", e.dir, func(t *benchTB) error {
		t0 := time.Now()
		k := testenv.StartKube(t)
		token := k.LeaseServiceAccount(t, kubeNS, "electd")
		kb := &kubeEnv{e: e, k: k, token: token, admin: k.Client(t), helper: helper}
		var err error
		if kb.direct, err = kb.kubeconfig(k.URL()); err != nil {
			return err
		}
		logf("k8s: kube-apiserver on %s, ready with its service account in %s", k.URL(), time.Since(t0).Round(time.Millisecond))
		b := &backend{name: "k8s", url: "k8s://" + kubeNS, kube: kb}
		renew, retry := cgTiming(kubeLongTTL)
		sRenew, sRetry := cgTiming(kubeShortTTL)
		e.rep.note(kubeSec, "One kube-apiserver %s (built from k8s.io/kubernetes, internal/testenv.StartKube: its own etcd on loopback, token authentication, RBAC), shared by both tools in the same run; each reaches it as a service account bound only to electd's least-privilege Role on leases in namespace %q. electd: `electd run --store k8s://%s` processes (the production build) with the recorder as child, KUBECONFIG naming the server and the token, unless a figure says in-process. client-go %s: test/bench/clientgo, a program that runs one LeaderElector on a LeaseLock (Run once, as controllers do; SIGTERM cancels its context), with client-go's default client options; its guarded code is the OnStartedLeading callback, which runs until its context is done. client-go's timing is the Kubernetes components' default at a %s lease (RenewDeadline %s, RetryPeriod %s, jitter 1.2) and the same ratios at %s (%s, %s).",
			testenvKubeVersion, kubeNS, kubeNS, clientGoVersion(), kubeLongTTL, renew, retry, kubeShortTTL, ms(sRenew), ms(sRetry))
		e.rep.note(kubeSec, "%s when this phase began; the machine is shared and every millisecond figure is noisy. Compare the tools within this run.", loadavg())

		steps := []struct {
			what string
			f    func() error
		}{
			{"k8s: graceful handover", func() error { return e.kubeHandover(ctx, kb, b) }},
			{"k8s: crash failover", func() error { return e.kubeCrash(ctx, kb, b) }},
			{"k8s: cut-off leader", func() error { return e.kubeCut(ctx, kb, b) }},
			{"k8s: idle followers", func() error { return e.kubeIdle(ctx, kb, b) }},
			{"k8s: per leader change", func() error { return e.kubeChanges(ctx, kb) }},
		}
		for i, s := range steps {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if len(e.cfg.kubeFigures) > 0 && !e.cfg.kubeFigures[strconv.Itoa(i+1)] {
				continue
			}
			logf("%s", s.what)
			t0 := time.Now()
			e.try(s.what, s.f)
			logf("%s: took %s", s.what, time.Since(t0).Round(time.Second))
		}
		logf("k8s: phase took %s", time.Since(started).Round(time.Second))
		e.rep.note(kubeSec, "The phase took %s (API server start included).", time.Since(started).Round(time.Second))
		return nil
	})
}

// testenvKubeVersion is the kube-apiserver the Makefile builds.
const testenvKubeVersion = "v1.37.2"
