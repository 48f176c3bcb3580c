package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// etcdServer is a single-member etcd on loopback, with etcd's default
// timing (heartbeat 100 ms, election 1 s) and a data dir on disk.
type etcdServer struct {
	name string
	addr string // client host:port
	p    *proc
	cli  *clientv3.Client // the benchmark's own client
}

func startEtcd(ctx context.Context, bin, dir, name string) (*etcdServer, error) {
	var lastErr error
	for try := 0; try < 4; try++ {
		cp, err1 := freePort()
		pp, err2 := freePort()
		if err1 != nil || err2 != nil || cp == pp {
			lastErr = fmt.Errorf("free ports: %v %v", err1, err2)
			continue
		}
		client := fmt.Sprintf("http://127.0.0.1:%d", cp)
		peer := fmt.Sprintf("http://127.0.0.1:%d", pp)
		data := filepath.Join(dir, name+"-data")
		_ = os.RemoveAll(data)
		args := []string{
			"--name", name, "--data-dir", data,
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", name + "=" + peer,
			"--log-level", "warn",
		}
		p, err := procs.start("etcd "+name, bin, args, startOpts{env: baseEnv(), log: filepath.Join(dir, name+".log")})
		if err != nil {
			return nil, err
		}
		e := &etcdServer{name: name, addr: fmt.Sprintf("127.0.0.1:%d", cp), p: p}
		if err := waitUntil(ctx, 20*time.Second, func() bool {
			return p.Exited() || e.healthy()
		}); err != nil || p.Exited() {
			p.killGroup()
			lastErr = fmt.Errorf("etcd %s did not become healthy (try %d): %v; see %s", name, try+1, err, filepath.Join(dir, name+".log"))
			continue
		}
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			p.killGroup()
			return nil, err
		}
		e.cli = cli
		return e, nil
	}
	return nil, lastErr
}

func (e *etcdServer) healthy() bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + e.addr + "/health")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var h struct{ Health string }
	return json.NewDecoder(resp.Body).Decode(&h) == nil && h.Health == "true"
}

func (e *etcdServer) close() {
	if e.cli != nil {
		_ = e.cli.Close()
	}
	e.p.killGroup()
}

// grpcCounts are etcd's gRPC server counters, summed per method
// ("Service/Method"), without the health service: calls and streams
// started and handled (ended), messages received (a stream's end, EOF
// or cancel, counts as one too: go-grpc-middleware's reporter counts every
// RecvMsg) and sent.
type grpcCounts struct {
	started, handled, received, sent map[string]float64
}

func (e *etcdServer) counts() (grpcCounts, error) {
	c := grpcCounts{started: map[string]float64{}, handled: map[string]float64{}, received: map[string]float64{}, sent: map[string]float64{}}
	hc := http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get("http://" + e.addr + "/metrics")
	if err != nil {
		return c, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var into map[string]float64
		switch {
		case strings.HasPrefix(line, "grpc_server_started_total{"):
			into = c.started
		case strings.HasPrefix(line, "grpc_server_handled_total{"):
			into = c.handled
		case strings.HasPrefix(line, "grpc_server_msg_received_total{"):
			into = c.received
		case strings.HasPrefix(line, "grpc_server_msg_sent_total{"):
			into = c.sent
		default:
			continue
		}
		if strings.Contains(line, "grpc.health") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return c, fmt.Errorf("etcd metrics: %q: %w", line, err)
		}
		into[label(line, "grpc_service")+"/"+label(line, "grpc_method")] += v
	}
	return c, sc.Err()
}

func label(line, name string) string {
	i := strings.Index(line, name+"=\"")
	if i < 0 {
		return ""
	}
	rest := line[i+len(name)+2:]
	j := strings.IndexByte(rest, '"')
	if j < 0 {
		return ""
	}
	s := rest[:j]
	if k := strings.LastIndexByte(s, '.'); k >= 0 {
		s = s[k+1:] // etcdserverpb.KV -> KV
	}
	return s
}

func sumMap(m map[string]float64, skip func(string) bool) float64 {
	t := 0.0
	for k, v := range m {
		if skip == nil || !skip(k) {
			t += v
		}
	}
	return t
}

func diffMap(a, b map[string]float64) map[string]float64 {
	d := map[string]float64{}
	for k, v := range b {
		if x := v - a[k]; x != 0 {
			d[k] = x
		}
	}
	return d
}

// redisServer is a redis-server on loopback without persistence.
type redisServer struct {
	name string
	addr string
	p    *proc
	cli  *goredis.Client
}

func startRedis(ctx context.Context, bin, dir, name string) (*redisServer, error) {
	var lastErr error
	for try := 0; try < 4; try++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		d := filepath.Join(dir, name+"-data")
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
		args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", d, "--protected-mode", "no", "--loglevel", "warning"}
		p, err := procs.start("redis-server "+name, bin, args, startOpts{env: baseEnv(), log: filepath.Join(dir, name+".log")})
		if err != nil {
			return nil, err
		}
		r := &redisServer{name: name, addr: fmt.Sprintf("127.0.0.1:%d", port), p: p}
		r.cli = goredis.NewClient(&goredis.Options{Addr: r.addr, ContextTimeoutEnabled: true})
		err = waitUntil(ctx, 10*time.Second, func() bool {
			if p.Exited() {
				return true
			}
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			info, err := r.cli.Info(pctx, "server").Result()
			return err == nil && strings.Contains(info, fmt.Sprintf("process_id:%d\r", p.Pid()))
		})
		if err != nil || p.Exited() {
			_ = r.cli.Close()
			p.killGroup()
			lastErr = fmt.Errorf("redis %s did not answer (try %d): %v", name, try+1, err)
			continue
		}
		return r, nil
	}
	return nil, lastErr
}

func (r *redisServer) close() {
	_ = r.cli.Close()
	r.p.killGroup()
}

// commandStats returns INFO commandstats: calls per command.
func (r *redisServer) commandStats(ctx context.Context) (map[string]float64, error) {
	s, err := r.cli.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	m := map[string]float64{}
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		name, rest, ok := strings.Cut(strings.TrimPrefix(l, "cmdstat_"), ":")
		if !ok || !strings.HasPrefix(l, "cmdstat_") {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				n, _ := strconv.ParseFloat(v, 64)
				m[name] = n
			}
		}
	}
	return m, nil
}

// scriptInner are the commands electd's Lua scripts call inside Redis;
// INFO is also what the benchmark itself sends. They are not requests
// from a client: everything else is (EVALSHA, EVAL, PING, SUBSCRIBE, ...).
var scriptInner = map[string]bool{
	"del": true, "exists": true, "get": true, "hdel": true, "hexists": true, "hget": true, "hkeys": true,
	"hlen": true, "hmget": true, "hset": true, "incr": true, "info": true, "publish": true, "set": true,
	"time": true, "zadd": true, "zrange": true, "zrangebyscore": true, "zrank": true, "zrem": true,
	"zremrangebyscore": true, "zscore": true,
}

// electdRequests counts client requests in a commandstats delta of electd
// traffic: everything but the commands its scripts run inside Redis.
func electdRequests(d map[string]float64) float64 {
	return sumMap(d, func(c string) bool { return scriptInner[c] })
}

// allButInfo counts every command but INFO (the benchmark's own).
func allButInfo(d map[string]float64) float64 {
	return sumMap(d, func(c string) bool { return c == "info" })
}

// waitUntil polls cond every 5 ms until it holds, ctx ends or d passes.
func waitUntil(ctx context.Context, d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s", d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// httpGet fetches a URL with a short timeout and returns status and body.
func httpGet(c *http.Client, url string) (int, []byte, error) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, b, err
}
