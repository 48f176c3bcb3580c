package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electd/electd/test/record"
)

// stampWriter notes when a process first wrote to stdout (etcdctl elect
// prints its key once it has won), and keeps the output in a file.
type stampWriter struct {
	mu    sync.Mutex
	first time.Time
	f     *os.File
}

func (w *stampWriter) Write(p []byte) (int, error) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.first.IsZero() && len(p) > 0 {
		w.first = now
	}
	if w.f != nil {
		_, _ = w.f.Write(p)
	}
	return len(p), nil
}

func (w *stampWriter) firstWrite() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.first
}

// ctlProc is one etcdctl lock or etcdctl elect process.
type ctlProc struct {
	label string
	p     *proc
	out   *stampWriter
	log   string
}

// startLock runs `etcdctl lock --ttl TTL NAME -- recorder`; the recorder
// logs to recLog as node label with token tok.
func (e *env) startLock(endpoint, name string, ttl time.Duration, label string, tok int, recLog string, more ...string) (*ctlProc, error) {
	args := []string{"--endpoints", endpoint, "lock", "--ttl", strconv.Itoa(int(ttl / time.Second)), name, "--", e.recorder}
	envs := baseEnv(append([]string{"RECORD_LOG=" + recLog, "ELECTD_ID=" + label, "ELECTD_FENCING_TOKEN=" + strconv.Itoa(tok)}, more...)...)
	log := filepath.Join(e.dir, "etcdctl-lock-"+name+"-"+label+".log")
	p, err := procs.start("etcdctl lock "+label, e.etcdctl, args, startOpts{env: envs, log: log})
	if err != nil {
		return nil, err
	}
	return &ctlProc{label: label, p: p, log: log}, nil
}

// lockQueue is one `etcdctl lock NAME` on the main etcd, whose commands
// (the recorder) write one record log: the peers' counterpart of cluster.
type lockQueue struct {
	e       *env
	name    string
	ttl     time.Duration
	rec     *recLog
	procs   []*ctlProc
	byLabel map[string]*ctlProc
}

func (e *env) newLockQueue(name string, ttl time.Duration) *lockQueue {
	return &lockQueue{e: e, name: name, ttl: ttl, rec: newRecLog(e.dir + "/record-" + name + ".log"), byLabel: map[string]*ctlProc{}}
}

// add starts one more etcdctl lock; the Nth logs as node lN with token N.
func (q *lockQueue) add() (*ctlProc, error) {
	seq := len(q.procs) + 1
	p, err := q.e.startLock(q.e.etcd.etcd.addr, q.name, q.ttl, fmt.Sprintf("l%d", seq), seq, q.rec.path)
	if err != nil {
		return nil, err
	}
	q.procs = append(q.procs, p)
	q.byLabel[p.label] = p
	return p, nil
}

// holder is the etcdctl lock whose command is run r.
func (q *lockQueue) holder(r record.Run) *ctlProc { return q.byLabel[r.Node] }

// waitQueued waits until want etcdctl lock processes hold keys.
func (q *lockQueue) waitQueued(ctx context.Context, want int, within time.Duration) error {
	return waitKeys(ctx, q.e.etcd.etcd.cli, q.name+"/", want, within)
}

// waitFirst waits until the first command runs.
func (q *lockQueue) waitFirst(ctx context.Context, what string) error {
	_, err := q.rec.waitRun(ctx, 10*time.Second, what, func(record.Run) bool { return true })
	return err
}

// close kills every etcdctl lock (with its group) and any command left
// behind.
func (q *lockQueue) close() {
	for _, p := range q.procs {
		p.p.killGroup()
	}
	q.rec.killRecorders(q.e.recorder)
}

// electPair is `etcdctl elect NAME a`, the leader, and `… b`, queued
// behind it.
type electPair struct{ a, b *ctlProc }

// startElectPair starts a, waits until it has won, then b, and waits until
// b is queued. Close the pair also when it fails.
func (e *env) startElectPair(ctx context.Context, name string) (electPair, error) {
	var p electPair
	var err error
	if p.a, err = e.startElect(e.etcd.etcd.addr, name, "a"); err != nil {
		return p, err
	}
	if _, err := p.a.waitWon(ctx, 10*time.Second); err != nil {
		return p, err
	}
	if p.b, err = e.startElect(e.etcd.etcd.addr, name, "b"); err != nil {
		return p, err
	}
	return p, waitKeys(ctx, e.etcd.etcd.cli, name+"/", 2, 10*time.Second)
}

// close kills both, the successor first.
func (p electPair) close() {
	for _, c := range []*ctlProc{p.b, p.a} {
		if c != nil {
			c.p.killGroup()
		}
	}
}

// startElect runs `etcdctl elect NAME PROPOSAL`.
func (e *env) startElect(endpoint, name, label string) (*ctlProc, error) {
	log := filepath.Join(e.dir, "etcdctl-elect-"+name+"-"+label+".log")
	f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	w := &stampWriter{f: f}
	p, err := procs.start("etcdctl elect "+label, e.etcdctl, []string{"--endpoints", endpoint, "elect", name, label},
		startOpts{env: baseEnv(), log: log, stdout: w})
	if err != nil {
		f.Close()
		return nil, err
	}
	go func() { <-p.Done(); f.Close() }()
	return &ctlProc{label: label, p: p, out: w, log: log}, nil
}

// waitWon waits until an elect process printed its key (it has won).
func (c *ctlProc) waitWon(ctx context.Context, within time.Duration) (time.Time, error) {
	var at time.Time
	err := waitUntil(ctx, within, func() bool {
		at = c.out.firstWrite()
		return !at.IsZero() || c.p.Exited()
	})
	if err == nil && at.IsZero() {
		err = fmt.Errorf("etcdctl elect %s exited (%d) without winning: %s", c.label, c.p.ExitCode(), tailFile(c.log, 5))
	}
	return at, err
}

// etcdKeys counts the keys under prefix (etcdctl's lock and election
// keys live under NAME/).
func etcdKeys(ctx context.Context, cli *clientv3.Client, prefix string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, prefix, clientv3WithPrefixCount()...)
	if err != nil {
		return 0, err
	}
	return int(resp.Count), nil
}

// waitKeys waits until prefix holds want keys.
func waitKeys(ctx context.Context, cli *clientv3.Client, prefix string, want int, within time.Duration) error {
	var got int
	err := waitUntil(ctx, within, func() bool {
		n, err := etcdKeys(ctx, cli, prefix)
		got = n
		return err == nil && n == want
	})
	if err != nil {
		return fmt.Errorf("%d keys under %s, want %d: %w", got, prefix, want, err)
	}
	return nil
}

// firstLease returns the lease of the oldest key under prefix (the holder).
func firstLease(ctx context.Context, cli *clientv3.Client, prefix string) (clientv3.LeaseID, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, prefix, clientv3.WithFirstCreate()...)
	if err != nil {
		return 0, "", err
	}
	if len(resp.Kvs) == 0 {
		return 0, "", fmt.Errorf("no key under %s", prefix)
	}
	return clientv3.LeaseID(resp.Kvs[0].Lease), string(resp.Kvs[0].Key), nil
}
