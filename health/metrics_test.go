package health

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/electd/electd/elector"
)

// scrape fetches /metrics through the handler and parses the text format.
func scrape(t *testing.T, s *Server) map[string]*dto.MetricFamily {
	t.Helper()
	r := httptest.NewRequest("GET", "/metrics", nil)
	r.Header.Set("Accept", "text/plain")
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("/metrics code = %d: %s", w.Code, w.Body.String())
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(w.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// sample finds the sample of family name whose labels are exactly labels
// (election included) and returns its value (a histogram's count).
func sample(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		if len(m.GetLabel()) != len(labels) {
			continue
		}
		for _, lp := range m.GetLabel() {
			if v, ok := labels[lp.GetName()]; !ok || v != lp.GetValue() {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		case m.Untyped != nil:
			return m.Untyped.GetValue(), true
		}
	}
	return 0, false
}

func newMetricsServer(t *testing.T, lease func() float64) (*Server, *Metrics, *View, *fakeObserver) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, "e", lease)
	if err != nil {
		t.Fatalf("NewMetrics: %v", err)
	}
	o := newFakeObserver()
	v := NewView("e", o, nil)
	v.CountChanges(m)
	runView(t, v)
	s, err := NewServer(Config{Election: "e", View: v, Gatherer: reg})
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	return s, m, v, o
}

type metricWant struct {
	name   string
	labels map[string]string // besides election="e"
	value  float64
}

func checkMetrics(t *testing.T, fams map[string]*dto.MetricFamily, wants []metricWant) {
	t.Helper()
	for _, w := range wants {
		labels := map[string]string{"election": "e"}
		for k, v := range w.labels {
			labels[k] = v
		}
		got, ok := sample(fams, w.name, labels)
		if !ok {
			t.Errorf("%s%v: missing", w.name, labels)
			continue
		}
		if got != w.value {
			t.Errorf("%s%v = %v, want %v", w.name, labels, got, w.value)
		}
	}
}

func TestMetricsInitialScrape(t *testing.T) {
	s, _, _, _ := newMetricsServer(t, nil)
	fams := scrape(t, s)
	wants := []metricWant{
		{name: "electd_is_leader"}, {name: "electd_fencing_token"}, {name: "electd_leader_changes_total"},
		{name: "electd_campaign_wait_seconds"}, {name: "electd_renewal_seconds"}, {name: "electd_lease_remaining_seconds"},
		{name: "electd_child_running"}, {name: "electd_child_starts_total"},
	}
	for _, r := range acquisitionResults {
		wants = append(wants, metricWant{name: "electd_acquisitions_total", labels: map[string]string{"result": r}})
	}
	for _, r := range []string{"deadline", "lease_lost", "key_lost", "resigned", "closed", "timing_refused", "other"} {
		wants = append(wants, metricWant{name: "electd_leadership_lost_total", labels: map[string]string{"reason": r}})
	}
	for _, o := range []string{"success", "failure", "signaled", "killed"} {
		wants = append(wants, metricWant{name: "electd_child_exits_total", labels: map[string]string{"outcome": o}})
	}
	for _, op := range storeOps {
		wants = append(wants, metricWant{name: "electd_store_errors_total", labels: map[string]string{"op": op, "class": "other", "server": ""}})
	}
	checkMetrics(t, fams, wants)
	for _, name := range []string{"go_goroutines", "go_memstats_alloc_bytes", "process_cpu_seconds_total", "process_open_fds"} {
		if _, ok := fams[name]; !ok {
			t.Errorf("%s missing: Go and process collectors not registered", name)
		}
	}
}

func TestMetricsEvents(t *testing.T) {
	lease := 4.5
	s, m, _, o := newMetricsServer(t, func() float64 { return lease })

	// A term: campaign error, win, child runs and fails, term lost.
	m.CampaignFailed(errors.New("store unreachable"))
	m.Acquired(1234567, 250*time.Millisecond)
	m.ChildStarted()
	m.StoreError("renew", elector.Classify("MISCONF", errors.New("MISCONF cannot persist")))
	m.StoreError("renew", elector.Classify("MISCONF", errors.New("MISCONF cannot persist")))
	m.StoreError("custom_op", errors.New("boom"))
	m.Renewed(3 * time.Millisecond)
	m.Renewed(40 * time.Millisecond)
	m.StoreError("renew", elector.WithServer("10.0.0.2:6379", elector.Classify("conn", errors.New("connection refused"))))
	fams := scrape(t, s)
	checkMetrics(t, fams, []metricWant{
		{name: "electd_is_leader", value: 1},
		{name: "electd_fencing_token", value: 1234567},
		{name: "electd_acquisitions_total", labels: map[string]string{"result": "won"}, value: 1},
		{name: "electd_acquisitions_total", labels: map[string]string{"result": "error"}, value: 1},
		{name: "electd_campaign_wait_seconds", value: 1},
		{name: "electd_child_running", value: 1},
		{name: "electd_child_starts_total", value: 1},
		{name: "electd_lease_remaining_seconds", value: 4.5},
		{name: "electd_store_errors_total", labels: map[string]string{"op": "renew", "class": "MISCONF", "server": ""}, value: 2},
		{name: "electd_store_errors_total", labels: map[string]string{"op": "custom_op", "class": "other", "server": ""}, value: 1},
		{name: "electd_store_errors_total", labels: map[string]string{"op": "grant", "class": "other", "server": ""}, value: 0},
		{name: "electd_store_errors_total", labels: map[string]string{"op": "renew", "class": "conn", "server": "10.0.0.2:6379"}, value: 1},
	})
	r := fams["electd_renewal_seconds"].GetMetric()[0].GetHistogram()
	if got := r.GetSampleSum(); r.GetSampleCount() != 2 || got < 0.0429 || got > 0.0431 {
		t.Errorf("renewal_seconds count %d sum %v, want 2 and 0.043", r.GetSampleCount(), got)
	}
	if b := r.GetBucket(); len(b) < 3 || b[0].GetUpperBound() != 0.0005 || b[len(b)-2].GetUpperBound() != 10 {
		t.Errorf("renewal_seconds buckets do not span 0.5 ms .. 10 s: %v", b)
	}
	h := fams["electd_campaign_wait_seconds"].GetMetric()[0].GetHistogram()
	if got := h.GetSampleSum(); got != 0.25 {
		t.Errorf("campaign_wait_seconds sum = %v, want 0.25", got)
	}
	// The text format lists +Inf as a last bucket; the finite ones must
	// span 1 ms .. 5 min.
	if b := h.GetBucket(); len(b) < 3 || b[0].GetUpperBound() != 0.001 || b[len(b)-2].GetUpperBound() != 300 {
		t.Errorf("campaign_wait_seconds buckets do not span 1 ms .. 5 min: %v", b)
	}

	m.ChildExited("failure")
	m.ChildBackoff(3, 4*time.Second)
	m.ChildStarted()
	m.ChildExited("signaled")
	m.Lost("key_lost")
	m.Lost("made_up") // counted as other
	m.Containment("pgroup")
	m.Containment("pidns") // the mode in force replaces any earlier one
	lease = 0
	// Leader changes seen by the View: baseline a, then b, then c.
	o.feed(t, leader("a", 1))
	o.feed(t, leader("b", 2))
	o.feed(t, leader("c", 3))
	fams = scrape(t, s)
	checkMetrics(t, fams, []metricWant{
		{name: "electd_is_leader", value: 0},
		{name: "electd_fencing_token", value: 1234567},
		{name: "electd_child_running", value: 0},
		{name: "electd_child_starts_total", value: 2},
		{name: "electd_child_exits_total", labels: map[string]string{"outcome": "failure"}, value: 1},
		{name: "electd_child_exits_total", labels: map[string]string{"outcome": "signaled"}, value: 1},
		{name: "electd_child_consecutive_failures", value: 3},
		{name: "electd_cool_down_seconds", value: 4},
		{name: "electd_child_exits_total", labels: map[string]string{"outcome": "success"}, value: 0},
		{name: "electd_leadership_lost_total", labels: map[string]string{"reason": "key_lost"}, value: 1},
		{name: "electd_leadership_lost_total", labels: map[string]string{"reason": "other"}, value: 1},
		{name: "electd_leadership_lost_total", labels: map[string]string{"reason": "deadline"}, value: 0},
		{name: "electd_lease_remaining_seconds", value: 0},
		{name: "electd_leader_changes_total", value: 2},
		{name: "electd_containment_info", labels: map[string]string{"mode": "pidns"}, value: 1},
	})
	if _, ok := sample(fams, "electd_leadership_lost_total", map[string]string{"election": "e", "reason": "made_up"}); ok {
		t.Error("unknown loss reason got its own series")
	}
	if _, ok := sample(fams, "electd_containment_info", map[string]string{"election": "e", "mode": "pgroup"}); ok {
		t.Error("an earlier containment mode is still reported")
	}
}

func TestNewMetricsRegistration(t *testing.T) {
	t.Run("two elections share a registry", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		if _, err := NewMetrics(reg, "a", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := NewMetrics(reg, "b", nil); err != nil {
			t.Fatalf("second election: %v", err)
		}
	})
	t.Run("same election twice fails and leaves the first intact", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		m, err := NewMetrics(reg, "a", nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := NewMetrics(reg, "a", nil); err == nil {
			t.Fatal("registering election a twice: nil error")
		}
		m.ChildStarted()
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]*dto.MetricFamily{}
		for _, f := range fams {
			byName[f.GetName()] = f
		}
		if v, ok := sample(byName, "electd_child_running", map[string]string{"election": "a"}); !ok || v != 1 {
			t.Errorf("child_running = %v, %v; want 1", v, ok)
		}
	})
	t.Run("nil registerer", func(t *testing.T) {
		if _, err := NewMetrics(nil, "a", nil); err == nil {
			t.Error("nil registerer: nil error")
		}
	})
	t.Run("nil metrics is a no-op", func(t *testing.T) {
		var m *Metrics
		m.Acquired(1, time.Second)
		m.CampaignFailed(errors.New("x"))
		m.Lost("resigned")
		m.ChildStarted()
		m.ChildExited("success")
		m.StoreError("renew", errors.New("x"))
		m.LeaderChanged()
	})
}

// TestHealthzStoreFailures: a store operation that fails now makes
// /healthz 503 and names its class, even while the store's PING answers;
// its next success makes it 200 again.
func TestHealthzStoreFailures(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, "e", nil)
	if err != nil {
		t.Fatalf("NewMetrics: %v", err)
	}
	s, err := NewServer(Config{Election: "e", View: NewView("e", newFakeObserver(), nil), Gatherer: reg,
		Healthy: func(context.Context) error { return nil }, StoreFailures: m.StoreFailures})
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	get := func() (int, map[string]any) {
		w := do(t, s, "GET", "/healthz", "192.0.2.1:5555", nil)
		return w.Code, decode(t, w)
	}
	if code, body := get(); code != 200 {
		t.Fatalf("before failures: %d %v, want 200", code, body)
	}
	misconf := elector.Classify("MISCONF", errors.New("MISCONF Redis is configured to save RDB snapshots"))
	m.StoreError("renew", misconf)
	m.StoreError("renew", misconf)
	m.StoreError("watch", elector.Classify("conn", errors.New("read: connection reset by peer")))
	code, body := get()
	if code != 503 {
		t.Fatalf("while renewals fail: code %d, want 503: %v", code, body)
	}
	errs, _ := body["store_errors"].([]any)
	if len(errs) != 2 {
		t.Fatalf("store_errors = %v, want renew and watch", body["store_errors"])
	}
	first, _ := errs[0].(map[string]any)
	if first["op"] != "renew" || first["class"] != "MISCONF" || first["failures"] != float64(2) {
		t.Errorf("store_errors[0] = %v, want op renew, class MISCONF, 2 failures", first)
	}
	if msg, _ := body["error"].(string); !strings.Contains(msg, "renew failing since ") || !strings.Contains(msg, "(MISCONF; 2 failed requests)") {
		t.Errorf("error = %q, want it to name the renewal and MISCONF", msg)
	}
	m.StoreAnswered("renew")
	m.StoreAnswered("watch")
	if code, body := get(); code != 200 || body["store_errors"] != nil {
		t.Fatalf("after the answers: %d %v, want 200 without store_errors", code, body)
	}
}

// TestStoreFailureLapses: an operation that failed once and was never
// retried (a cleanup that gave up) stops counting as failing after
// failingFor, so /healthz does not stay 503 after the store recovered.
func TestStoreFailureLapses(t *testing.T) {
	now := time.Unix(1000, 0)
	s := storeFailures{now: func() time.Time { return now }}
	s.failed("leave", "conn", errors.New("connection refused"))
	s.failed("renew", "OOM", errors.New("OOM"))
	now = now.Add(failingFor / 2)
	s.failed("renew", "OOM", errors.New("OOM"))
	if got := s.list(); len(got) != 2 {
		t.Fatalf("after %s: %v, want leave and renew", failingFor/2, got)
	}
	now = now.Add(failingFor/2 + time.Millisecond)
	got := s.list()
	if len(got) != 1 || got[0].Op != "renew" || got[0].Failures != 2 {
		t.Fatalf("after %s: %v, want renew alone (still retried)", failingFor+time.Millisecond, got)
	}
}
