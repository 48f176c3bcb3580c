package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/electd/electd/elector"
)

// Timing constants of electd (README, "Safety"): each acknowledged renewal
// sent at s guarantees the term until s + ttl·(1−drift) − ε.
const (
	electdDrift   = 0.01
	electdEpsilon = 10 * time.Millisecond
)

func window(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*(1-electdDrift)) - electdEpsilon
}

// backend is one store kind with its main server.
type backend struct {
	name  string // "etcd" or "redis"
	url   string // --store of the main server
	etcd  *etcdServer
	redis *redisServer
	kube  *kubeEnv // k8s://: every copy names the namespace; $KUBECONFIG the server
	zk    *zkEnv   // zk://
}

func (b *backend) storeURL(addr string) string { return b.name + "://" + addr }

func (b *backend) addr() string {
	if b.etcd != nil {
		return b.etcd.addr
	}
	return b.redis.addr
}

// queued is the number of candidates in an electd election, asked from
// the store directly.
func (b *backend) queued(ctx context.Context, election string) (int, error) {
	if b.kube != nil {
		return b.kube.queued(ctx, election)
	}
	if b.zk != nil {
		return b.zk.queued(ctx, election)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if b.etcd != nil {
		resp, err := b.etcd.cli.Get(ctx, "/electd/elections/"+election+"/", clientv3WithPrefixCount()...)
		if err != nil {
			return 0, err
		}
		return int(resp.Count), nil
	}
	n, err := b.redis.cli.ZCard(ctx, "electd:{"+election+"}:queue").Result()
	return int(n), err
}

var nodeSeq atomic.Int64

// node is one `electd run` process.
type node struct {
	id   string
	http string // host:port
	p    *proc
	log  string
	hc   *http.Client
}

type nodeSpec struct {
	election string
	id       string
	store    string // --store URL
	ttl      time.Duration
	args     []string // more flags
	env      []string // more environment
	command  []string // after --; nil: readiness only
	dir      string   // for the log
	bin      string   // electd binary; "": the tree's production build
	logLevel string   // --log-level; "": info
}

// startNode starts electd run and waits until /livez answers.
func (e *env) startNode(ctx context.Context, s nodeSpec) (*node, error) {
	var lastErr error
	for try := 0; try < 3; try++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		n := &node{
			id:   s.id,
			http: "127.0.0.1:" + strconv.Itoa(port),
			log:  filepath.Join(s.dir, fmt.Sprintf("electd-%s-%s-%d.log", s.election, s.id, nodeSeq.Add(1))),
			hc:   &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}},
		}
		level := s.logLevel
		if level == "" {
			level = "info"
		}
		args := []string{"run", "--store", s.store, "--election", s.election, "--id", s.id,
			"--listen", n.http, "--log-format", "json", "--log-level", level}
		if s.ttl > 0 {
			args = append(args, "--ttl", s.ttl.String())
		}
		args = append(args, s.args...)
		if len(s.command) > 0 {
			args = append(append(args, "--"), s.command...)
		}
		bin := s.bin
		if bin == "" {
			bin = e.electd
		}
		n.p, err = procs.start("electd "+s.id, bin, args, startOpts{env: baseEnv(s.env...), log: n.log})
		if err != nil {
			return nil, err
		}
		err = waitUntil(ctx, 15*time.Second, func() bool {
			if n.p.Exited() {
				return true
			}
			code, _, err := httpGet(n.hc, "http://"+n.http+"/livez")
			return err == nil && code == http.StatusOK
		})
		if err == nil && !n.p.Exited() {
			return n, nil
		}
		n.p.killGroup()
		lastErr = fmt.Errorf("electd %s did not answer /livez: %v (exit %d); log %s:\n%s", s.id, err, n.p.ExitCode(), n.log, tailFile(n.log, 15))
		if !strings.Contains(lastErr.Error(), "address already in use") {
			return nil, lastErr
		}
	}
	return nil, lastErr
}

func (n *node) kill() {
	if !n.p.Exited() {
		n.p.killGroup()
	}
}

func (n *node) signal(sig syscall.Signal) error { return n.p.signal(sig) }

// leaderDoc is GET /leader: the leader's record (null when none is known)
// and this copy's own view.
type leaderDoc struct {
	Leader *elector.Leader `json:"leader"`
	Self   struct {
		ID     string `json:"id"`
		Leader bool   `json:"leader"`
	} `json:"self"`
}

func (n *node) leader() (leaderDoc, []byte, error) {
	var d leaderDoc
	code, body, err := httpGet(n.hc, "http://"+n.http+"/leader")
	if err != nil {
		return d, nil, err
	}
	if err := json.Unmarshal(body, &d); err != nil {
		return d, body, fmt.Errorf("/leader %d: %w", code, err)
	}
	return d, body, nil
}

// isLeader asks /leader whether this copy leads.
func (n *node) isLeader() bool {
	d, _, err := n.leader()
	return err == nil && d.Self.Leader
}

func (n *node) resign() error {
	req, _ := http.NewRequest(http.MethodPost, "http://"+n.http+"/resign", nil)
	resp, err := n.hc.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /resign to %s: %s", n.id, resp.Status)
	}
	return nil
}

// metric reads one gauge or counter (first series) from /metrics.
func (n *node) metric(name string) (float64, time.Time, error) {
	v, sent, _, err := n.metricAt(name)
	return v, sent, err
}

// metricAt is metric with the times the request was sent and the answer
// arrived: the value was computed between the two.
func (n *node) metricAt(name string) (v float64, sent, got time.Time, err error) {
	sent = time.Now()
	code, body, err := httpGet(n.hc, "http://"+n.http+"/metrics")
	got = time.Now()
	if err != nil {
		return 0, sent, got, err
	}
	if code != http.StatusOK {
		return 0, sent, got, fmt.Errorf("/metrics: %d", code)
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		return v, sent, got, err
	}
	return 0, sent, got, fmt.Errorf("/metrics of %s has no %s", n.id, name)
}

// errNotLeading: the copy's gauge says it holds no term.
var errNotLeading = errors.New("not leading")

// validUntil is the leader's local deadline, from its
// electd_lease_remaining_seconds gauge, read conservatively: as if the
// gauge had been computed when the request was sent (the earliest it can
// have been), which can only make the deadline, and every bound derived
// from it, earlier than the truth.
func (n *node) validUntil() (time.Time, error) {
	v, sent, _, err := n.metricAt("electd_lease_remaining_seconds")
	if err != nil {
		return time.Time{}, err
	}
	if v <= 0 {
		return time.Time{}, fmt.Errorf("%s: %w (lease_remaining_seconds %v)", n.id, errNotLeading, v)
	}
	return sent.Add(time.Duration(v * float64(time.Second))), nil
}

// tailFile returns the last n lines of a file.
func tailFile(path string, n int) string {
	b, err := readFileLimit(path, 1<<20)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// logTimes returns the times of electd's JSON log lines with message msg.
func (n *node) logTimes(msg string) []time.Time {
	b, err := readFileLimit(n.log, 8<<20)
	if err != nil {
		return nil
	}
	var out []time.Time
	needle := `"msg":"` + msg + `"`
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, needle) {
			continue
		}
		var v struct {
			Time time.Time `json:"time"`
		}
		if json.Unmarshal([]byte(line), &v) == nil {
			out = append(out, v.Time)
		}
	}
	return out
}

// lastBefore returns the latest time in ts not after t (zero if none).
func lastBefore(ts []time.Time, t time.Time) time.Time {
	var best time.Time
	for _, x := range ts {
		if !x.After(t) && x.After(best) {
			best = x
		}
	}
	return best
}

// firstAfter returns the earliest time in ts after t (zero if none).
func firstAfter(ts []time.Time, t time.Time) time.Time {
	var best time.Time
	for _, x := range ts {
		if x.After(t) && (best.IsZero() || x.Before(best)) {
			best = x
		}
	}
	return best
}
