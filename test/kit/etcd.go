package kit

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdServers are an etcd store's: one server (etcd), or the three
// members of a cluster (etcd-cluster), read through one client of all
// of them.
type etcdServers struct {
	servers
	endpoints []string
	dial      func(t testing.TB) *clientv3.Client
	once      sync.Once
	cli       *clientv3.Client
}

// newEtcd is the Servers of srv, an etcd server or cluster whose client
// endpoints are endpoints, made by its entry with t; dial makes a client
// of all of them, closed when its t ends.
func newEtcd(t testing.TB, srv lifecycle, endpoints []string, reach Reach, dial func(t testing.TB) *clientv3.Client) *etcdServers {
	return &etcdServers{
		servers:   servers{value: srv, srv: srv, scheme: "etcd", url: "etcd://" + strings.Join(endpoints, ","), reach: reach, t: t},
		endpoints: endpoints, dial: dial,
	}
}

// client is the store's client, made on first use.
func (e *etcdServers) client() *clientv3.Client {
	e.once.Do(func() { e.cli = e.dial(e.t) })
	return e.cli
}

func (e *etcdServers) Queued(t testing.TB, election string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	resp, err := e.client().Get(ctx, "/electd/elections/"+election+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatalf("count candidates: %v", err)
	}
	return int(resp.Count)
}

func (e *etcdServers) LastRun(t testing.TB, election string) *RunRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	resp, err := e.client().Get(ctx, "/electd/runs/"+election)
	if err != nil {
		t.Fatalf("read the run record: %v", err)
	}
	if len(resp.Kvs) == 0 {
		return nil
	}
	return decodeRun(t, resp.Kvs[0].Value)
}

// Counts reads grpc_server_started_total by method from the /metrics of
// every endpoint, summed.
func (e *etcdServers) Counts(ctx context.Context) (map[string]int, error) {
	out := map[string]int{}
	for _, ep := range e.endpoints {
		if err := addMetrics(ctx, out, "http://"+ep+"/metrics"); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// RoundTrips: every gRPC call etcd counts is a client's request.
func (e *etcdServers) RoundTrips(d map[string]int) int {
	n := 0
	for _, v := range d {
		n += v
	}
	return n
}

// addMetrics adds grpc_server_started_total by method, from the metrics
// at url, to out.
func addMetrics(ctx context.Context, out map[string]int, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "grpc_server_started_total{") {
			continue
		}
		_, rest, _ := strings.Cut(line, `grpc_method="`)
		method, _, _ := strings.Cut(rest, `"`)
		f := strings.Fields(line)
		n, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return fmt.Errorf("metrics line %q: %w", line, err)
		}
		out[method] += int(n)
	}
	return sc.Err()
}

// decodeRun decodes a run record, failing t if it does not parse.
func decodeRun(t testing.TB, b []byte) *RunRecord {
	t.Helper()
	var r RunRecord
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("run record %q: %v", b, err)
	}
	return &r
}
