package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/electd/electd/internal/testenv"
)

// The raft timing of internal/testenv's etcd cluster (etcd_cluster.go),
// for the notes.
const (
	etcdClusterHeartbeat = 50 * time.Millisecond
	etcdClusterElection  = 500 * time.Millisecond
)

// etcdClusterFailover: on internal/testenv's three-member etcd cluster,
// electd with --store etcd://m1,m2,m3: first a leader alone's renewals
// (clusterRenewals: requests per renewal interval and latency), then the
// crash phase's kill -9 trials (crashElectd: the same bound assertion and
// target) at --ttl 2s, then at the default 15s with a third as many
// trials. With -baseline, each figure for both builds (compared): the
// renewals in alternating slices, the crash trials of both at once.
//
// A phase of its own rather than a backend of the crash phase: the
// cluster is three more etcd processes, and its peer traffic runs through
// fault proxies in this process, so beside the single-server trials it
// would load those, and they it; run alone, each figure is measured on a
// machine that runs only its own trials.
func (e *env) etcdClusterFailover(ctx context.Context) error {
	// testenv finds etcd by $ELECTD_ETCD_BIN first: the build every other
	// phase runs.
	if err := os.Setenv("ELECTD_ETCD_BIN", e.etcdBin); err != nil {
		return err
	}
	builds := e.compared()
	return withTB(ctx, "etcd-cluster", e.dir, func(t *benchTB) error {
		started := time.Now()
		cl := testenv.StartDurableEtcdCluster(t) // fsync, as production runs it
		logf("etcd cluster up in %s: %s", time.Since(started).Round(time.Millisecond), cl.URL())
		// First, while nothing else uses the cluster: its counters count
		// one leader's requests.
		if err := e.clusterRenewals(ctx, t, cl, builds); err != nil {
			e.rep.failed("etcd cluster: the leader's renewals", err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		b := &backend{name: "etcd-cluster", url: cl.URL(),
			etcd: &etcdServer{name: "cluster", addr: cl.Endpoints()[0], cli: cl.Client(t)}}
		// A Raft leader change extends every lease on the store (the new
		// leader's lessor gives each its whole TTL again, plus the
		// election timeout: lessor.Promote): count them.
		changes := func(ttl time.Duration, f func()) {
			before, err1 := leaderChanges(cl.Endpoints())
			f()
			after, err2 := leaderChanges(cl.Endpoints())
			if err := errors.Join(err1, err2); err != nil {
				e.rep.failed("etcd cluster: leader changes", err)
				return
			}
			e.rep.note("Crash failover", "etcd-cluster, --ttl %s: Raft leader changes during the trials (etcd_server_leader_changes_seen_total, most of any member): %.0f.", ttl, after-before)
		}
		// Each build's trials in 1/len(builds) of the elections (rounded
		// up), all at once: two builds share the same minutes and about
		// the load of one alone.
		crash := func(ttl time.Duration, trials, ngroups int) {
			var fs []func(context.Context)
			for _, bd := range builds {
				g := (ngroups + len(builds) - 1) / len(builds)
				fs = append(fs, func(ctx context.Context) { e.crashElectd(ctx, b, bd, ttl, trials, g) })
			}
			e.parallel(ctx, fs...)
		}
		changes(shortTTL, func() { crash(shortTTL, e.cfg.trials, e.cfg.groups) })
		if ctx.Err() == nil {
			// A third of the trials in a third as many groups: as in the
			// long phase, a third of the kills are each group's first,
			// of a leader whose only lease refresh so far was its grant.
			n := max(1, e.cfg.longTrials/3)
			changes(defaultTTL, func() { crash(defaultTTL, n, max(1, n/3)) })
		}
		e.rep.note("Crash failover", "etcd-cluster: internal/testenv's three etcd members on loopback (heartbeat %s, election %s, data on disk; peer traffic through a TCP proxy per link, in the benchmark's process), electd with --store etcd://m1,m2,m3; a member that is not the Raft leader forwards lease requests (renewals, LeaseTimeToLive, revocations) to the leader.",
			etcdClusterHeartbeat, etcdClusterElection)
		if len(builds) > 1 {
			e.rep.note("Crash failover", "etcd-cluster, %s beside %s: at each TTL the trials of both builds ran at the same time, each in half the elections (rounded up) of a run without -baseline, with as many trials.",
				builds[1].label, builds[0].label)
		}
		return ctx.Err()
	})
}

// leaderChanges is the most leader changes any member has seen
// (etcd_server_leader_changes_seen_total), read from their /metrics.
func leaderChanges(endpoints []string) (float64, error) {
	hc := http.Client{Timeout: 5 * time.Second}
	most := 0.0
	for _, ep := range endpoints {
		code, body, err := httpGet(&hc, "http://"+ep+"/metrics")
		if err != nil {
			return 0, err
		}
		if code != http.StatusOK {
			return 0, fmt.Errorf("%s/metrics: %d", ep, code)
		}
		found := false
		for _, line := range strings.Split(string(body), "\n") {
			v, ok := strings.CutPrefix(line, "etcd_server_leader_changes_seen_total ")
			if !ok {
				continue
			}
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, fmt.Errorf("%s/metrics: %q: %w", ep, line, err)
			}
			most, found = max(most, n), true
		}
		if !found {
			return 0, fmt.Errorf("%s/metrics has no etcd_server_leader_changes_seen_total", ep)
		}
	}
	return most, nil
}
