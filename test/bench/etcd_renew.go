package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/electd/electd/internal/testenv"
)

// renewSec holds, per build, what an electd leader's renewals cost on the
// etcd cluster: requests and latency.
const renewSec = "etcd cluster: the leader's renewals"

const (
	// renewTTL: renewals every 400 ms, so that a minute holds 150 of them
	// (latency samples, against 20 at the default TTL); the requests per
	// renewal interval do not depend on the TTL.
	renewTTL      = shortTTL
	renewInterval = renewTTL / 5
	// renewSlices: each build's window is cut into this many slices, run
	// in the order A B B A (baseline, tree, tree, baseline; one build
	// alone: A A), so that a load that drifts over the phase weighs on
	// both builds alike. One leader at a time: the cluster's counters
	// cannot tell two clients apart.
	renewSlices = 2
	// renewSettle: renewals credited before a slice's window opens. By
	// then the leader's client is connected to every member (clientv3's
	// round_robin dials all three at once) and its grant and campaign are
	// long done.
	renewSettle = 3
	// renewedMsg is electd's debug line once a renewal is credited
	// (elector/etcd/session.go, renewLoop), with valid_until = the
	// renewal's send time + the window.
	renewedMsg = "lease renewed"
)

// renewal is one credited renewal, from the leader's log.
type renewal struct{ sent, credited time.Time }

// renewals reads a copy's "lease renewed" lines: credited at the line's
// own time, sent at valid_until less the window (elector.Timing.Window at
// the default drift and ε: node.go's window). It reads no other field, so
// it reads any build's log alike.
func (n *node) renewals(ttl time.Duration) ([]renewal, error) {
	b, err := readFileLimit(n.log, 8<<20)
	if err != nil {
		return nil, err
	}
	var out []renewal
	needle := `"msg":"` + renewedMsg + `"`
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, needle) {
			continue
		}
		var v struct {
			Time time.Time `json:"time"`
		}
		var until time.Time
		err := json.Unmarshal([]byte(line), &v)
		if err == nil {
			until, err = findTime([]byte(line), "valid_until")
		}
		if err != nil || v.Time.IsZero() || until.IsZero() {
			return nil, fmt.Errorf("%s: a %q line without time and valid_until: %s (%v)", n.log, renewedMsg, line, err)
		}
		out = append(out, renewal{sent: until.Add(-window(ttl)), credited: v.Time})
	}
	return out, nil
}

// findTime returns the time under key in a JSON object, at its top level
// or in a group (electd's elector logs its fields in the group "etcd").
func findTime(obj []byte, key string) (time.Time, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(obj, &m); err != nil {
		return time.Time{}, err
	}
	if raw, ok := m[key]; ok {
		var t time.Time
		err := json.Unmarshal(raw, &t)
		return t, err
	}
	for _, raw := range m {
		if len(raw) > 0 && raw[0] == '{' {
			if t, err := findTime(raw, key); err != nil || !t.IsZero() {
				return t, err
			}
		}
	}
	return time.Time{}, nil
}

// renewTally is one build's sum over its slices.
type renewTally struct {
	req       map[string]float64 // requests by method, all members
	byMember  []float64          // requests by member
	intervals int                // renewal intervals counted
	lat       []time.Duration    // send → credited, of the renewals sent in the windows
	changes   float64            // Raft leader changes during the windows
	raft      []string           // the Raft leader of each slice
}

// clusterRenewals runs, for each build, an electd leader alone on the
// cluster at --ttl 2s with `sleep` as its child, over renewSlices windows
// of whole renewal intervals, and reports its store requests per renewal
// interval (etcd's counters, all members) and its renewals' latency
// from send to credit (its own log).
func (e *env) clusterRenewals(ctx context.Context, t *benchTB, cl *testenv.EtcdCluster, builds []build) error {
	var members []etcdCounter
	for i, ep := range cl.Endpoints() {
		members = append(members, etcdCounter{&etcdServer{name: fmt.Sprintf("m%d", i), addr: ep}})
	}
	n := max(1, int(e.cfg.idleWindow/renewSlices/renewInterval)) // intervals per slice
	tallies := make([]*renewTally, len(builds))
	for i := range tallies {
		tallies[i] = &renewTally{req: map[string]float64{}, byMember: make([]float64, len(members))}
	}
	seq := 0
	for r := range renewSlices {
		for k := range builds {
			if r%2 == 1 {
				k = len(builds) - 1 - k
			}
			seq++
			election := fmt.Sprintf("renew-%s%d", builds[k].key, seq)
			if err := e.renewSlice(ctx, t, cl, members, builds[k], election, n, tallies[k]); err != nil {
				return fmt.Errorf("%s: %w", election, err)
			}
		}
	}
	e.renewReport(builds, tallies, n)
	return nil
}

// renewSlice runs one leader over one window of n renewal intervals and
// adds what it counted to tl.
func (e *env) renewSlice(ctx context.Context, t *benchTB, cl *testenv.EtcdCluster, members []etcdCounter, bd build, election string, n int, tl *renewTally) error {
	raft := cl.Leader(t) // Status requests: before the window
	ch0, err := leaderChanges(cl.Endpoints())
	if err != nil {
		return err
	}
	lead, err := e.startNode(ctx, nodeSpec{election: election, id: "leader", store: cl.URL(), ttl: renewTTL,
		bin: bd.bin, logLevel: "debug", dir: e.dir, command: []string{e.sleepBin, "86400"}})
	if err != nil {
		return err
	}
	defer lead.kill()
	if err := waitUntil(ctx, 10*time.Second, lead.isLeader); err != nil {
		return fmt.Errorf("%s did not lead: %w", bd.on("etcd-cluster"), err)
	}
	var rs []renewal
	var rerr error
	if err := waitUntil(ctx, renewSettle*renewInterval+10*time.Second, func() bool {
		rs, rerr = lead.renewals(renewTTL)
		return rerr != nil || len(rs) >= renewSettle
	}); err != nil || rerr != nil {
		return fmt.Errorf("%s: %d %q lines in its log (--log-level debug), want %d: %v %v; log %s:\n%s",
			bd.on("etcd-cluster"), len(rs), renewedMsg, renewSettle, err, rerr, lead.log, tailFile(lead.log, 10))
	}
	// The window opens half an interval after a renewal's send, on
	// electd's renewal grid (origin + k·interval), and lasts n intervals:
	// each renewal, and whatever electd sends after it before the next,
	// falls inside it entirely or not at all (unless that took over half
	// an interval), so the count is n times a renewal's requests, not
	// that give or take one per method.
	from := rs[len(rs)-1].sent.Add(renewInterval / 2)
	for time.Until(from) < 10*time.Millisecond {
		from = from.Add(renewInterval)
	}
	to := from.Add(time.Duration(n) * renewInterval)
	snap := func() ([]map[string]float64, error) {
		var out []map[string]float64
		for _, m := range members {
			c, err := m.snap(ctx)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
		return out, nil
	}
	sleepCtx(ctx, time.Until(from))
	s0, err := snap()
	if err != nil {
		return err
	}
	sleepCtx(ctx, time.Until(to))
	if ctx.Err() != nil {
		return ctx.Err()
	}
	s1, err := snap()
	if err != nil {
		return err
	}
	lead.kill()
	ch1, err := leaderChanges(cl.Endpoints())
	if err != nil {
		return err
	}
	for i := range members {
		req := etcdRequests(diffMap(s0[i], s1[i]))
		for k, v := range req {
			tl.req[k] += v
		}
		tl.byMember[i] += sumMap(req, nil)
	}
	if rs, err = lead.renewals(renewTTL); err != nil {
		return err
	}
	for _, x := range rs {
		if !x.sent.Before(from) && x.sent.Before(to) {
			tl.lat = append(tl.lat, x.credited.Sub(x.sent))
		}
	}
	tl.intervals += n
	tl.changes += ch1 - ch0
	tl.raft = append(tl.raft, fmt.Sprintf("m%d", raft))
	return nil
}

// renewReport writes each build's rows side by side, figure by figure,
// and the notes.
func (e *env) renewReport(builds []build, tallies []*renewTally, n int) {
	subj := func(bd build) string {
		return bd.subject(fmt.Sprintf("electd, etcd-cluster, --ttl %s, leader alone", renewTTL))
	}
	for k, bd := range builds {
		tl := tallies[k]
		iv := float64(tl.intervals)
		e.rep.add(renewSec, subj(bd), fmt.Sprintf("store requests per renewal interval (%s), all members", renewInterval),
			fmt.Sprintf("%.2f (%s)", sumMap(tl.req, nil)/iv, detail(tl.req, 1/iv, nil)), "", "")
	}
	for k, bd := range builds {
		e.rep.add(renewSec, subj(bd), "renewal latency, send → credited: median / p99", summarize(tallies[k].lat).short(), "", "")
	}
	for k, bd := range builds {
		tl := tallies[k]
		var by []string
		for i, v := range tl.byMember {
			by = append(by, fmt.Sprintf("m%d %.0f", i, v))
		}
		for _, d := range tl.lat {
			if d < 0 {
				e.rep.failed("etcd cluster: renewal latency", fmt.Errorf("%s: a renewal credited %s before it was sent: its valid_until is not send time + TTL·(1−%g) − %s",
					bd.on("etcd-cluster"), ms(-d), electdDrift, electdEpsilon))
				break
			}
		}
		e.rep.note(renewSec, "%s, %d windows of %d renewal intervals (Raft leader %s): %.0f requests over %d intervals (%s), by member %s; %d renewals sent in the windows and credited (of %d intervals); latency %s; Raft leader changes during the windows: %.0f.",
			bd.on("etcd-cluster"), len(tl.raft), n, strings.Join(tl.raft, ", "), sumMap(tl.req, nil), tl.intervals,
			detail(tl.req, 1, nil), strings.Join(by, ", "), len(tl.lat), tl.intervals, summarize(tl.lat), tl.changes)
	}
	if len(builds) == 2 {
		a, b := tallies[0], tallies[1]
		diff := map[string]float64{} // per interval, over both builds' methods
		for k, v := range a.req {
			diff[k] -= v / float64(a.intervals)
		}
		for k, v := range b.req {
			diff[k] += v / float64(b.intervals)
		}
		for k, v := range diff {
			if v == 0 {
				delete(diff, k)
			}
		}
		la, lb := summarize(a.lat), summarize(b.lat)
		e.rep.note(renewSec, "%s − %s: store requests per renewal interval %+.2f (%s); latency median %s, p99 %s.",
			builds[1].label, builds[0].label, sumMap(diff, nil), detail(diff, 1, nil), signed(lb.med-la.med), signed(lb.p99-la.p99))
	}
	order := ""
	if len(builds) == 2 {
		order = " ordered A B B A (baseline, tree, tree, baseline), so that both builds share the run's load"
	}
	e.rep.note(renewSec, "How counted: each build's electd led alone on the cluster (--ttl %s, --log-level debug, `sleep` as its child), one copy at a time, in %d slices per build%s. Each window opens half a renewal interval after one of the leader's renewals was sent and lasts whole intervals, so a renewal and the requests that follow it fall inside entirely or not at all. Requests: etcd's grpc_server_started_total summed over the three members (a unary call or a stream opened; Watch as in the idle cost), read from their /metrics (HTTP, uncounted); a member forwards lease requests to the Raft leader over its peer link, also uncounted. Latency: for each renewal sent in a window, the time of electd's debug line %q (written once the renewal is credited toward the term) less the renewal's send time, which is its valid_until − (TTL·(1−%g) − %s): the window of elector.Timing at the default drift and ε.",
		renewTTL, renewSlices, order, renewedMsg, electdDrift, electdEpsilon)
}

// signed is ms with an explicit sign.
func signed(d time.Duration) string {
	if d >= 0 {
		return "+" + ms(d)
	}
	return ms(d)
}
