package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

const (
	loadSec     = "GET /leader under load"
	loadConns   = 32
	loadRounds  = 3
	loadMaxReqs = 3_000_000 // per run, a bound besides the duration
	bareEnv     = "BENCH_BARE_ADDR"
	bareBody    = "BENCH_BARE_BODY"
)

// bareServer is the benchmark re-executed as a bare net/http server that
// answers GET /leader with fixed bytes and the same headers as electd.
func bareServer() int {
	body, err := os.ReadFile(os.Getenv(bareBody))
	if err != nil {
		fmt.Fprintln(os.Stderr, "bare:", err)
		return 1
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /leader", func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		w.Write(body)
	})
	srv := &http.Server{Addr: os.Getenv(bareEnv), Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, "bare:", err)
		return 1
	}
	return 0
}

type loadResult struct {
	n      int
	errs   int
	dur    time.Duration
	lat    []time.Duration
	bodyOK bool
}

func (r loadResult) rps() float64 { return float64(r.n) / r.dur.Seconds() }

// load sends GET url from loadConns keep-alive connections for d (or
// loadMaxReqs requests), recording every latency.
func load(ctx context.Context, url string, d time.Duration, want []byte) loadResult {
	tr := &http.Transport{MaxIdleConns: loadConns, MaxIdleConnsPerHost: loadConns, MaxConnsPerHost: loadConns,
		DisableCompression: true, DialContext: (&net.Dialer{Timeout: 2 * time.Second}).DialContext}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	var (
		count  atomic.Int64
		errs   atomic.Int64
		bad    atomic.Bool
		mu     sync.Mutex
		all    []time.Duration
		wg     sync.WaitGroup
		lctx   context.Context
		cancel context.CancelFunc
	)
	lctx, cancel = context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	for range loadConns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, 1<<16)
			buf := bytes.NewBuffer(make([]byte, 0, 4096))
			for lctx.Err() == nil && count.Load() < loadMaxReqs {
				t := time.Now()
				req, _ := http.NewRequestWithContext(lctx, http.MethodGet, url, nil)
				resp, err := client.Do(req)
				if err != nil {
					if lctx.Err() == nil {
						errs.Add(1)
					}
					continue
				}
				buf.Reset()
				_, err = io.Copy(buf, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					if lctx.Err() == nil {
						errs.Add(1)
					}
					continue
				}
				lat = append(lat, time.Since(t))
				count.Add(1)
				if want != nil && !bytes.Equal(buf.Bytes(), want) {
					bad.Store(true)
				}
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return loadResult{n: len(all), errs: int(errs.Load()), dur: time.Since(start), lat: all, bodyOK: !bad.Load()}
}

// leaderLoad compares electd's GET /leader (a follower's, answered from its
// watched view) with a bare handler serving the same bytes, in turns.
func (e *env) leaderLoad(ctx context.Context) (err error) {
	c := e.newCluster(e.etcd, "load", defaultTTL, nil, nil)
	defer c.close()
	defer func() { err = c.describeErr(err) }()
	lead, err := e.startNode(ctx, nodeSpec{election: c.election, id: "leader", store: e.etcd.url, dir: e.dir})
	if err != nil {
		return err
	}
	defer lead.kill()
	if err := waitUntil(ctx, 20*time.Second, lead.isLeader); err != nil {
		return fmt.Errorf("load: no leader: %w", err)
	}
	fol, err := e.startNode(ctx, nodeSpec{election: c.election, id: "follower", store: e.etcd.url, dir: e.dir})
	if err != nil {
		return err
	}
	defer fol.kill()
	var body []byte
	if err := waitUntil(ctx, 20*time.Second, func() bool {
		d, b, err := fol.leader()
		body = b
		return err == nil && d.Leader != nil && d.Leader.ID == "leader"
	}); err != nil {
		return fmt.Errorf("load: follower does not see the leader: %w", err)
	}
	bodyPath := filepath.Join(e.dir, "leader-body.json")
	if err := os.WriteFile(bodyPath, body, 0o644); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	bareAddr := fmt.Sprintf("127.0.0.1:%d", port)
	bare, err := procs.start("bare handler", self, nil, startOpts{
		env: baseEnv(bareEnv+"="+bareAddr, bareBody+"="+bodyPath), log: filepath.Join(e.dir, "bare.log")})
	if err != nil {
		return err
	}
	defer bare.killGroup()
	hc := &http.Client{Timeout: time.Second}
	if err := waitUntil(ctx, 10*time.Second, func() bool {
		code, b, err := httpGet(hc, "http://"+bareAddr+"/leader")
		return err == nil && code == 200 && bytes.Equal(b, body)
	}); err != nil {
		return fmt.Errorf("bare handler: %w", err)
	}
	targets := []struct{ name, url string }{
		{"bare", "http://" + bareAddr + "/leader"},
		{"electd", "http://" + fol.http + "/leader"},
	}
	res := map[string]*loadResult{}
	for _, t := range targets { // warm-up
		load(ctx, t.url, 300*time.Millisecond, nil)
	}
	for round := 0; round < loadRounds; round++ {
		for _, t := range targets {
			r := load(ctx, t.url, e.cfg.loadRun, body)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !r.bodyOK {
				return fmt.Errorf("load: %s answered other bytes than %s", t.name, body)
			}
			acc := res[t.name]
			if acc == nil {
				acc = &loadResult{bodyOK: true}
				res[t.name] = acc
			}
			acc.n += r.n
			acc.errs += r.errs
			acc.dur += r.dur
			acc.lat = append(acc.lat, r.lat...)
		}
	}
	b, el := res["bare"], res["electd"]
	if b.n == 0 || el.n == 0 {
		return errors.New("load: no successful requests")
	}
	ratio := el.rps() / b.rps()
	bl, ell := summarize(b.lat), summarize(el.lat)
	e.rep.add(loadSec, "bare net/http handler, same bytes", "throughput; latency median / p99",
		fmt.Sprintf("%.0f req/s; %s", b.rps(), bl.short()), "", "")
	e.rep.add(loadSec, "electd follower, etcd", "throughput; latency median / p99",
		fmt.Sprintf("%.0f req/s; %s", el.rps(), ell.short()), "", "")
	e.rep.add(loadSec, "electd follower, etcd", "throughput ÷ bare handler's", fmt.Sprintf("%.0f %%", 100*ratio), "≥ 80 %", verdict(ratio >= 0.8))
	e.rep.note(loadSec, "%d keep-alive connections from a Go client in the benchmark process, loopback; %d × %s per target, alternating, after a warm-up; the bare handler runs in a process of its own (the benchmark binary re-executed) and sets the same headers; %d-byte body. Errors: bare %d, electd %d. Client and server share the machine's CPUs.",
		loadConns, loadRounds, e.cfg.loadRun, len(body), b.errs, el.errs)
	return nil
}
