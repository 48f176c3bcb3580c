package torture

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/internal/faultproxy"
	"github.com/electd/electd/internal/testenv"
	"github.com/electd/electd/test/kit"
	"github.com/electd/electd/test/proc"
	"github.com/electd/electd/test/record"
)

const (
	exitTimeout = 10 * time.Second // SIGTERM to exit
	goneBound   = time.Second      // a kill -9'd electd's child is gone
)

// cluster is one backend under attack: its store server, N candidates,
// each reaching it over a kit.Link of its own (its own fault proxy, one
// per server of a Redlock quorum, or, for a topology that cannot be
// proxied, a kernel filter), and the record log of all children.
type cluster struct {
	t        *testing.T
	cfg      config
	s        *kit.Store
	dir      string
	logPath  string
	election string
	nodes    []*node
	lives    []*life // every electd process ever started, in start order
	j        *journal
	history  *[]*fault // for failure messages
	// containment is the mode electd reports in /healthz (the same for
	// every copy: they run on one host with one set of privileges).
	containment string
	orphans     int // workers found alive after their term ended
	// direct: the store cannot be proxied (Sentinel, Cluster, the etcd
	// cluster: kit.Reach has no Addrs): every node reaches it directly,
	// cut off by a kernel filter, and the proxy faults are not drawn. A
	// Redlock quorum is not direct: every node reaches each server through
	// a proxy of its own (node.proxies).
	direct bool
	// slot is the election's hash slot (redis+cluster's own faults).
	slot int
	// rlAdmin: the harness's own client of each server of a Redlock
	// quorum, in its order, made by its first fault (quorumAdmin).
	rlAdmin []*redis.Client
}

// node is one candidate host: an id, its link to the store, its child's
// kind, and the electd process currently running as it (nil while it is
// down).
type node struct {
	id   string
	link *kit.Link
	// proxies are the link's fault proxies: its one proxy, or (Redlock)
	// one per server of the quorum, in the quorum's order; nil when direct.
	proxies []*faultproxy.Proxy
	cur     *life
	// workers: its child starts three workers (RECORD_WORKERS=1: in its
	// group, setsid, a daemon); ignoreTerm: they ignore SIGTERM.
	workers, ignoreTerm bool
}

// The node mix: n1, n4, … run a child that is one process; n2, n5, … one
// with workers; n3, n6, … one whose workers ignore SIGTERM.
func mix(i int) (workers, ignoreTerm bool) {
	switch (i - 1) % 3 {
	case 1:
		return true, false
	case 2:
		return true, true
	}
	return false, false
}

// cut black-holes n's way to the store; heal lets it through again.
func (n *node) cut() { n.link.Cut() }

func (n *node) heal() { n.link.Heal() }

// each applies f to every proxy of n (none when the cluster is direct).
func (n *node) each(f func(*faultproxy.Proxy)) {
	for _, px := range n.proxies {
		f(px)
	}
}

func (n *node) kind() string {
	switch {
	case n.ignoreTerm:
		return "workers that ignore SIGTERM"
	case n.workers:
		return "workers"
	}
	return "one process"
}

// life is one electd process.
type life struct {
	node *node
	*kit.Electd
	// killed is when the harness sent SIGKILL (zero: it did not).
	killed time.Time
}

func newCluster(t *testing.T, cfg config, s *kit.Store) *cluster {
	// Every node reaches the store over a kit.Link of its own: through its
	// own proxy, a proxy of its own in front of each server of a Redlock
	// quorum, or (a topology's client dials the nodes it is told of) directly,
	// where the proxy faults are left out.
	c := &cluster{t: t, cfg: cfg, s: s, dir: t.TempDir(), election: "torture-" + s.Name, direct: len(s.Reach().Addrs) == 0}
	c.slot = testenv.Slot("electd:{" + c.election + "}:")
	c.logPath = filepath.Join(c.dir, "record.log")
	c.j = newJournal(c.logPath)
	if *flagNobody {
		c.shareWithNobody()
	}
	for i := 1; i <= cfg.nodes; i++ {
		n := &node{id: "n" + strconv.Itoa(i), link: s.Link(t)} // removed when t ends
		n.proxies = n.link.Proxies
		n.workers, n.ignoreTerm = mix(i)
		c.nodes = append(c.nodes, n)
	}
	// Runs before the links' cleanup and the store's (LIFO): every electd
	// is killed while its link still stands.
	t.Cleanup(c.cleanup)
	for _, n := range c.nodes {
		c.start(n)
	}
	return c
}

// cleanup kills every electd, proves that no child outlived it, and checks
// the electd logs.
func (c *cluster) cleanup() {
	c.killAll()
	for _, l := range c.lives {
		l.Crashes()
	}
	if *flagKeep != "" {
		c.keepLogs(*flagKeep)
	}
}

// keepLogs copies the electd logs and the record log into dir/BACKEND,
// before t.TempDir removes them.
func (c *cluster) keepLogs(dir string) {
	dst := filepath.Join(dir, c.s.Name)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		c.t.Errorf("keep logs: %v", err)
		return
	}
	ents, err := os.ReadDir(c.dir)
	if err != nil {
		c.t.Errorf("keep logs: %v", err)
		return
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".log") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(c.dir, e.Name()))
		if err == nil {
			err = os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644)
		}
		if err != nil {
			c.t.Errorf("keep logs: %v", err)
		}
	}
	c.t.Logf("torture %s: logs kept in %s", c.s.Name, dst)
}

// killAll kills every electd with SIGKILL, and proves that no child
// outlived it, nor any worker where the containment promises that (pidns,
// userns).
// Under pgroup only the direct child dies with electd: the harness kills
// the workers left. Calling it again does nothing more.
func (c *cluster) killAll() {
	for _, n := range c.nodes {
		if l := n.cur; l != nil {
			l.kill9()
			n.cur = nil
		}
	}
	if err := c.j.sync(); err != nil {
		c.t.Errorf("record log: %v", err)
	}
	for _, r := range c.j.runs {
		// By r's environment, not only its program: a worker of a later
		// term may have r's pid by now (a pgroup run of redis+sentinel was
		// failed that way by a setsid worker, 12 minutes after r's child
		// was kill -9'd).
		if c.isChild(r) && !proc.WaitGone(r.Pid, goneBound) && c.isChild(r) {
			c.t.Errorf("child %s outlived its electd (SIGKILLed) by %s; killing it", r, goneBound)
			_ = syscall.Kill(r.Pid, syscall.SIGKILL)
		}
	}
	for _, w := range c.j.workers {
		if proc.WaitGone(w.Pid, goneBound) || !c.isWorker(w) {
			continue
		}
		if !c.treeDies() {
			c.t.Logf("%s outlived its kill -9'd electd, as %s containment allows (documented); killing it", w, c.containment)
			_ = syscall.Kill(w.Pid, syscall.SIGKILL)
			continue
		}
		if c.orphan(w, "outlived its electd (SIGKILLed at the end) by more than "+goneBound.String()) {
			c.t.Errorf("orphan: %s outlived its electd (SIGKILLed at the end) by %s under %s containment; killed it",
				w, goneBound, c.containment)
		}
	}
}

// start starts `electd run` as n (a new life) and waits for /livez.
func (c *cluster) start(n *node) *life {
	c.t.Helper()
	dial, sys := n.link.Dial, (*syscall.SysProcAttr)(nil)
	if n.link.SysProcAttr != nil {
		attr := *n.link.SysProcAttr // the start adds to it
		sys = &attr
	}
	args := append(append([]string{"run", "--election", c.election, "--id", n.id}, dial.Flags()...),
		"--ttl", c.cfg.ttl.String(), "--stop-timeout", c.cfg.stopTimeout.String(),
		"--cool-down", c.cfg.coolDown.String(),
		"--log-format", "json", "--log-level", "debug")
	if *flagContain != "" {
		args = append(args, "--containment", *flagContain)
	}
	args = append(args, "--", bin.Recorder)
	env := []string{"RECORD_LOG=" + c.logPath}
	if n.workers {
		env = append(env, "RECORD_WORKERS=1")
	}
	if n.ignoreTerm {
		env = append(env, "RECORD_WORKERS_IGNORE_TERM=1")
	}
	env = append(env, dial.Env...)
	if *flagNobody {
		// A link's cut matches the socket's group: keep it, change the user.
		if sys == nil {
			sys = &syscall.SysProcAttr{}
		}
		cred := syscall.Credential{Uid: nobody, Gid: nobody} // no supplementary groups
		if sys.Credential != nil {
			cred.Gid = sys.Credential.Gid
		}
		sys.Credential = &cred
	}
	_, err := bin.StartLive(c.t, kit.Spec{
		ID: n.id, Args: args, Env: env,
		LogPath:     filepath.Join(c.dir, n.id+".log"),
		Banner:      fmt.Sprintf("=== torture: starting %s at %s", n.id, time.Now().Format(time.RFC3339Nano)),
		HTTPTimeout: 3 * time.Second,
		SysProcAttr: sys,
		Started:     func(e *kit.Electd) { c.lives = append(c.lives, &life{node: n, Electd: e}) },
	})
	if err != nil {
		c.t.Fatalf("start %s: %v", n.id, err)
	}
	l := c.lives[len(c.lives)-1]
	if err := c.learnContainment(l); err != nil {
		c.t.Fatalf("start %s: %v", n.id, err)
	}
	n.cur = l
	return l
}

// learnContainment reads the containment mode from l's /healthz (whose
// code depends on the store; the body names the mode either way) and
// checks that every copy reports the same one.
func (c *cluster) learnContainment(l *life) error {
	_, body, err := l.Get("/healthz")
	if err != nil {
		return fmt.Errorf("/healthz: %w", err)
	}
	var h struct {
		Containment string `json:"containment"`
	}
	if err := json.Unmarshal(body, &h); err != nil {
		return fmt.Errorf("/healthz %s: %w", body, err)
	}
	if h.Containment == "" {
		h.Containment = "unreported" // an older electd ($TORTURE_ELECTD_BIN): no promise for the tree
	}
	switch {
	case c.containment == "":
		c.containment = h.Containment
	case c.containment != h.Containment:
		return fmt.Errorf("%s reports containment %s, an earlier copy %s", l.node.id, h.Containment, c.containment)
	}
	return nil
}

// treeDies reports whether the containment in force kills the child's
// whole tree when electd is kill -9'd (pidns, userns: the kernel kills the
// namespace); under pgroup only the direct child dies then.
func (c *cluster) treeDies() bool { return c.containment == "pidns" || c.containment == "userns" }

// isWorker reports whether pid w.Pid is still that worker: a recorder of
// this cluster's log with w's role, node and token (by its environment), so
// that a pid reused by another process is never taken for it.
func (c *cluster) isWorker(w *worker) bool {
	return hasEnv(w.Pid, "RECORD_LOG="+c.logPath, "RECORD_ROLE="+w.Role,
		"ELECTD_ID="+w.Node, "ELECTD_FENCING_TOKEN="+strconv.FormatUint(w.Token, 10))
}

// isChild reports whether r's pid still runs r's child: the recorder, with
// r's node and token in its environment. A pid is reused once the kernel's
// counter wraps (32768 by default: a busy host gets there in minutes), by
// any process, another term's recorder among them.
func (c *cluster) isChild(r *record.Run) bool {
	return proc.IsOurs(r.Pid, bin.Recorder) &&
		hasEnv(r.Pid, "RECORD_LOG="+c.logPath, "ELECTD_ID="+r.Node, "ELECTD_FENCING_TOKEN="+strconv.FormatUint(r.Token, 10))
}

// hasEnv reports whether pid is alive with every one of kvs in its
// environment.
func hasEnv(pid int, kvs ...string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil || !proc.Alive(pid) {
		return false
	}
	env := "\x00" + string(b)
	for _, kv := range kvs {
		if !strings.Contains(env, "\x00"+kv+"\x00") {
			return false
		}
	}
	return true
}

// signalWorker signals w if it is still that worker (ESRCH if not).
func (c *cluster) signalWorker(w *worker, sig syscall.Signal) error {
	if !c.isWorker(w) {
		return syscall.ESRCH
	}
	return syscall.Kill(w.Pid, sig)
}

// orphan counts w as an orphan (once) and SIGKILLs it, so that it cannot
// disturb the rest of the run.
func (c *cluster) orphan(w *worker, why string) bool {
	_ = c.signalWorker(w, syscall.SIGKILL)
	if w.orphan {
		return false
	}
	w.orphan = true
	c.orphans++
	c.t.Logf("orphan: %s %s", w, why)
	return true
}

// up are the nodes whose electd runs.
func (c *cluster) up() []*node {
	var out []*node
	for _, n := range c.nodes {
		if n.cur != nil {
			out = append(out, n)
		}
	}
	return out
}

// down are the nodes whose electd is not running.
func (c *cluster) down() []*node {
	var out []*node
	for _, n := range c.nodes {
		if n.cur == nil {
			out = append(out, n)
		}
	}
	return out
}

func (c *cluster) node(id string) *node {
	for _, n := range c.nodes {
		if n.id == id {
			return n
		}
	}
	return nil
}

// end is when the process was known to be gone: the SIGKILL, else the
// reap. Only after Done.
func (l *life) end() time.Time {
	if !l.killed.IsZero() {
		return l.killed
	}
	return l.Reaped()
}

// kill9 SIGKILLs electd (if still running) and waits until it is reaped.
func (l *life) kill9() {
	if !l.Exited() {
		l.killed = time.Now()
	}
	l.Kill()
}

// leader asks the process's /leader.
func (l *life) leader() (kit.LeaderDoc, error) {
	d, _, err := l.Leader()
	return d, err
}

// nobody is the uid (and, off a link, the gid) -torture.nobody runs
// every electd as.
const nobody = 65534

// shareWithNobody lets an electd run as nobody reach the binaries, the
// run's directory and the record log, which its children append to.
func (c *cluster) shareWithNobody() {
	c.t.Helper()
	if os.Geteuid() != 0 {
		c.t.Fatalf("-torture.nobody needs a root harness (euid %d): it starts electd as uid %d", os.Geteuid(), nobody)
	}
	for _, dir := range []string{bin.Dir, filepath.Dir(c.dir), c.dir} {
		if err := os.Chmod(dir, 0o755); err != nil {
			c.t.Fatal(err)
		}
	}
	f, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o666)
	if err == nil {
		err = f.Close()
	}
	if err == nil {
		err = os.Chmod(c.logPath, 0o666)
	}
	if err != nil {
		c.t.Fatal(err)
	}
}
