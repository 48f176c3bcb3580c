package etcd_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/testenv"
)

// BenchmarkHandover measures, per resignation: the time until the
// successor's Campaign returns (handover) and until a third copy's Observe
// reports the successor (leader-change detection).
//
//	go test -run '^$' -bench Handover ./elector/etcd/
func BenchmarkHandover(b *testing.B) {
	srv := testenv.StartEtcd(b)
	h := &harness{srv: srv}
	ctx := context.Background()
	mk := func(id string) elector.Elector {
		return h.New(b, electortest.Candidate{StoreAddr: srv.Endpoint(), Candidate: elector.Candidate{Election: "bench", ID: id, Timing: timingOf(5 * time.Second)}})
	}
	cands := []elector.Elector{mk("a"), mk("b")}
	watch := mk("watcher").Observe(ctx)
	term, err := cands[0].Campaign(ctx)
	if err != nil {
		b.Fatal(err)
	}
	waitSeen(b, watch, term.Token)
	var handover, detect []time.Duration
	b.ResetTimer()
	for i := range b.N {
		next := make(chan *elector.Term, 1)
		go func() {
			t, err := cands[(i+1)%2].Campaign(ctx)
			if err != nil {
				b.Error(err)
			}
			next <- t
		}()
		electortest.Eventually(b, 5*time.Second, "successor queued", func() bool { return h.Queued(b, "bench") == 2 })
		start := time.Now()
		if err := term.Resign(ctx); err != nil {
			b.Fatal(err)
		}
		term = <-next
		handover = append(handover, time.Since(start))
		waitSeen(b, watch, term.Token)
		detect = append(detect, time.Since(start))
	}
	b.StopTimer()
	report(b, "handover", handover)
	report(b, "detect", detect)
}

func waitSeen(b *testing.B, ch <-chan elector.Leader, token uint64) {
	b.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case l := <-ch:
			if l.Token == token {
				return
			}
		case <-timeout:
			b.Fatalf("observer did not see token %d", token)
		}
	}
}

func report(b *testing.B, name string, ds []time.Duration) {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	med, p99 := ds[len(ds)/2], ds[min(len(ds)-1, len(ds)*99/100)]
	b.ReportMetric(float64(med.Microseconds())/1000, name+"-median-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, name+"-p99-ms")
	b.Logf("%s over %d runs: median %s, p99 %s", name, len(ds), med, p99)
}

// BenchmarkIdleFollowerRequests counts, with etcd's own metrics, the
// requests one idle follower adds per minute: the requests of a leader and
// a follower over a window, less those of the leader alone.
//
//	go test -run '^$' -bench IdleFollower -benchtime 1x ./elector/etcd/
func BenchmarkIdleFollowerRequests(b *testing.B) {
	const ttl, window = 5 * time.Second, 20 * time.Second
	srv := testenv.StartEtcd(b)
	h := &harness{srv: srv}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mk := func(id string) elector.Elector {
		return h.New(b, electortest.Candidate{StoreAddr: srv.Endpoint(), Candidate: elector.Candidate{Election: "idle", ID: id, Timing: timingOf(ttl)}})
	}
	if _, err := mk("leader").Campaign(ctx); err != nil {
		b.Fatal(err)
	}
	rpcAlone, msgAlone := countOver(b, srv, window)
	go func() { _, _ = mk("follower").Campaign(ctx) }()
	electortest.Eventually(b, 5*time.Second, "follower queued", func() bool { return h.Queued(b, "idle") == 2 })
	rpcBoth, msgBoth := countOver(b, srv, window)
	perMin := func(n int) float64 { return float64(n) * float64(time.Minute) / float64(window) }
	b.ReportMetric(perMin(rpcBoth-rpcAlone), "follower-rpc/min")
	b.ReportMetric(perMin(msgBoth-msgAlone), "follower-msg/min")
	b.Logf("ttl %s (renew every %s), %s windows: leader alone %d RPCs (%d messages), with a follower %d (%d): the follower adds %.1f RPCs/min (%.1f messages/min)",
		ttl, ttl/5, window, rpcAlone, msgAlone, rpcBoth, msgBoth, perMin(rpcBoth-rpcAlone), perMin(msgBoth-msgAlone))
}

func countOver(b *testing.B, srv *testenv.Etcd, d time.Duration) (rpcs, msgs int) {
	r0, m0 := grpcCount(b, srv, "grpc_server_started_total{"), grpcCount(b, srv, "grpc_server_msg_received_total{")
	time.Sleep(d) // a measurement window, not synchronisation
	return grpcCount(b, srv, "grpc_server_started_total{") - r0, grpcCount(b, srv, "grpc_server_msg_received_total{") - m0
}

// grpcCount sums an etcd gRPC counter over every method, excluding the
// health checks the test harness itself makes.
func grpcCount(b *testing.B, srv *testenv.Etcd, metric string) int {
	resp, err := http.Get(fmt.Sprintf("http://%s/metrics", srv.Endpoint()))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	total := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, metric) || strings.Contains(line, "grpc.health") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			b.Fatal(err)
		}
		total += int(v)
	}
	return total
}
