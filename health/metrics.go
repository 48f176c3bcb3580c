package health

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/electd/electd/elector"
)

// Label values pre-initialised to 0, so that dashboards and alerts see every
// series from the first scrape.
var (
	acquisitionResults = []string{"won", "error"}
	lossReasons        = []string{"deadline", "suspended", "lease_lost", "key_lost", "resigned", "closed", "timing_refused", "other"}
	childOutcomes      = []string{"success", "failure", "signaled", "killed"}
	storeOps           = []string{"grant", "renew", "campaign", "watch", "resign", "leader"}
)

// campaignWaitBuckets cover 1 ms (a free election) to 5 min (a long queue).
var campaignWaitBuckets = []float64{
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
	1, 2.5, 5, 10, 15, 30, 60, 120, 300,
}

// renewalBuckets cover 0.5 ms (a renewal on loopback) to 10 s (a renewal
// that took most of a long window).
var renewalBuckets = []float64{
	0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
	1, 2.5, 5, 10,
}

// Metrics holds electd's Prometheus collectors for one election. Every name
// has the prefix electd_ and the constant label election. The event methods
// are safe for concurrent use, never block, and do nothing on a nil *Metrics.
type Metrics struct {
	isLeader       prometheus.Gauge
	fencingToken   prometheus.Gauge
	leaderChanges  prometheus.Counter
	acquisitions   *prometheus.CounterVec
	campaignWait   prometheus.Histogram
	renewal        prometheus.Histogram
	lost           *prometheus.CounterVec
	leaseRemaining prometheus.GaugeFunc
	childRunning   prometheus.Gauge
	childStarts    prometheus.Counter
	childExits     *prometheus.CounterVec
	childFailures  prometheus.Gauge
	coolDown       prometheus.Gauge
	storeErrors    *prometheus.CounterVec
	containment    *prometheus.GaugeVec

	failing storeFailures // what fails now, for /healthz
}

var _ elector.Instrument = (*Metrics)(nil)

// NewMetrics creates the collectors and registers them on reg, together
// with the Go and process collectors (those two are skipped without error if
// reg already has them, e.g. prometheus.DefaultRegisterer).
//
// leaseRemaining backs electd_lease_remaining_seconds: it must be cheap, safe
// for concurrent use, and return the seconds left in the current term (0
// when not leading). nil reports 0.
//
// If a registration fails, the collectors registered so far are unregistered
// and the error is returned.
func NewMetrics(reg prometheus.Registerer, election string, leaseRemaining func() float64) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("metrics: nil registerer")
	}
	if leaseRemaining == nil {
		leaseRemaining = func() float64 { return 0 }
	}
	// Every collector has the namespace electd and the election's label;
	// a counter vector starts with each of its known label values at 0.
	const ns = "electd"
	cl := prometheus.Labels{"election": election}
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: ns, Name: name, Help: help, ConstLabels: cl}
	}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts(opts(name, help)))
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts(opts(name, help)))
	}
	counterVec := func(name, help, label string, values []string) *prometheus.CounterVec {
		vec := prometheus.NewCounterVec(prometheus.CounterOpts(opts(name, help)), []string{label})
		for _, v := range values {
			vec.WithLabelValues(v)
		}
		return vec
	}
	m := &Metrics{
		isLeader:      gauge("is_leader", "1 while this copy holds a term of the election, else 0."),
		fencingToken:  gauge("fencing_token", "Fencing token of the last term this copy won (kept after the term ends)."),
		leaderChanges: counter("leader_changes_total", "New leadership terms observed in the election (by any copy)."),
		acquisitions: counterVec("acquisitions_total", "Campaigns that ended, by result (won, error).",
			"result", acquisitionResults),
		campaignWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Name: "campaign_wait_seconds", ConstLabels: cl,
			Help:    "Time from the start of a campaign to winning it.",
			Buckets: campaignWaitBuckets,
		}),
		renewal: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Name: "renewal_seconds", ConstLabels: cl,
			Help:    "Time from a lease renewal's send to the moment it counted (its answer, and its proof where the store needs one: etcd's raft entry, a Redlock quorum's last answer); the deadline is counted from the send, so this is what a renewal costs of the window. Renewals that failed are in store_errors_total{op=\"renew\"}.",
			Buckets: renewalBuckets,
		}),
		lost: counterVec("leadership_lost_total", "Terms of this copy that ended, by reason (deadline, suspended, lease_lost, key_lost, resigned, closed, other).",
			"reason", lossReasons),
		leaseRemaining: prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts("lease_remaining_seconds",
			"Seconds until the current term's conservative local deadline (0 when not leading).")), leaseRemaining),
		childRunning: gauge("child_running", "1 while the supervised command runs, else 0."),
		childStarts:  counter("child_starts_total", "Times the supervised command was started."),
		childExits: counterVec("child_exits_total", "Exits of the supervised command, by outcome (success, failure, signaled, killed).",
			"outcome", childOutcomes),
		childFailures: gauge("child_consecutive_failures", "Failures of the supervised command in a row: exits with a code other than 0, deaths by a signal that was not part of a stop, failed starts; 0 after an exit with code 0 or a run that lasted --cool-down-max."),
		coolDown:      gauge("cool_down_seconds", "Wait before campaigning again after handing the term over: --cool-down, doubled for each consecutive failure after the first, at most --cool-down-max."),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts(opts("store_errors_total",
			"Failed store operations, by operation, class of error (the store's error code, timeout, conn, other) and server (host:port, for a store of independent servers such as a Redlock quorum; empty for a store seen as one), including those retried.")),
			[]string{"op", "class", "server"}),
		containment: prometheus.NewGaugeVec(prometheus.GaugeOpts(opts("containment_info",
			"1 for the containment mode in force for the child's process tree (pidns, userns, pgroup, or none without a command).")), []string{"mode"}),
	}

	for _, op := range storeOps {
		m.storeErrors.WithLabelValues(op, elector.ClassOther, "")
	}

	own := []prometheus.Collector{
		m.isLeader, m.fencingToken, m.leaderChanges, m.acquisitions, m.campaignWait, m.renewal,
		m.lost, m.leaseRemaining, m.childRunning, m.childStarts, m.childExits,
		m.childFailures, m.coolDown, m.storeErrors, m.containment,
	}
	var done []prometheus.Collector
	undo := func() {
		for _, c := range done {
			reg.Unregister(c)
		}
	}
	for _, c := range own {
		if err := reg.Register(c); err != nil {
			undo()
			return nil, fmt.Errorf("register metrics of election %q: %w", election, err)
		}
		done = append(done, c)
	}
	shared := []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	}
	for _, c := range shared {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				continue
			}
			undo()
			return nil, fmt.Errorf("register runtime metrics: %w", err)
		}
		done = append(done, c)
	}
	return m, nil
}

// Containment records the containment mode in force:
// containment_info{mode} = 1.
func (m *Metrics) Containment(mode string) {
	if m == nil {
		return
	}
	m.containment.Reset()
	m.containment.WithLabelValues(mode).Set(1)
}

// Acquired records a won campaign: acquisitions_total{result="won"}++,
// campaign_wait_seconds observes waited, is_leader=1, fencing_token=token.
// The gauge is a float64: tokens above 2^53 lose precision there.
func (m *Metrics) Acquired(token uint64, waited time.Duration) {
	if m == nil {
		return
	}
	m.acquisitions.WithLabelValues("won").Inc()
	m.campaignWait.Observe(waited.Seconds())
	m.fencingToken.Set(float64(token))
	m.isLeader.Set(1)
}

// CampaignFailed records a campaign that ended with an error:
// acquisitions_total{result="error"}++.
func (m *Metrics) CampaignFailed(err error) {
	if m == nil {
		return
	}
	m.acquisitions.WithLabelValues("error").Inc()
}

// Lost records the end of this copy's term: leadership_lost_total{reason}++
// and is_leader=0. reason is one of elector.LossReason's names; anything else
// is counted as "other", which keeps the label's values bounded.
func (m *Metrics) Lost(reason string) {
	if m == nil {
		return
	}
	if !slices.Contains(lossReasons, reason) {
		reason = "other"
	}
	m.lost.WithLabelValues(reason).Inc()
	m.isLeader.Set(0)
}

// ChildStarted records a start of the command: child_starts_total++,
// child_running=1.
func (m *Metrics) ChildStarted() {
	if m == nil {
		return
	}
	m.childStarts.Inc()
	m.childRunning.Set(1)
}

// ChildExited records an exit of the command: child_exits_total{outcome}++,
// child_running=0. outcome is "success", "failure", "signaled" or "killed".
func (m *Metrics) ChildExited(outcome string) {
	if m == nil {
		return
	}
	m.childExits.WithLabelValues(outcome).Inc()
	m.childRunning.Set(0)
}

// ChildBackoff records the streak of the command's failures and the
// cool-down it gives: child_consecutive_failures, cool_down_seconds.
func (m *Metrics) ChildBackoff(failures int, coolDown time.Duration) {
	if m == nil {
		return
	}
	m.childFailures.Set(float64(failures))
	m.coolDown.Set(coolDown.Seconds())
}

// StoreError records a failed store operation:
// store_errors_total{op,class,server}++ with class elector.ErrorClass(err)
// and server elector.ErrorServer(err), and op
// fails now (StoreFailures) until StoreAnswered(op). It makes *Metrics an
// elector.Instrument.
func (m *Metrics) StoreError(op string, err error) {
	if m == nil {
		return
	}
	class := elector.ErrorClass(err)
	m.storeErrors.WithLabelValues(op, class, elector.ErrorServer(err)).Inc()
	m.failing.failed(op, class, err)
}

// StoreAnswered records that op succeeded after failures.
func (m *Metrics) StoreAnswered(op string) {
	if m == nil {
		return
	}
	m.failing.answered(op)
}

// Renewed records a renewal that counted: renewal_seconds.
func (m *Metrics) Renewed(took time.Duration) {
	if m == nil {
		return
	}
	m.renewal.Observe(took.Seconds())
}

// StoreFailures returns the store operations that fail now (failed, and not
// answered since), by op; nil on a nil *Metrics.
func (m *Metrics) StoreFailures() []StoreFailure {
	if m == nil {
		return nil
	}
	return m.failing.list()
}

// LeaderChanged records a new term observed in the election:
// leader_changes_total++. View calls it when given m by View.CountChanges.
func (m *Metrics) LeaderChanged() {
	if m == nil {
		return
	}
	m.leaderChanges.Inc()
}

// BuildInfo names the running binary: electd_build_info's labels.
type BuildInfo struct {
	Version   string // the release, or "dev"
	Revision  string // the VCS revision it was built from, or "unknown"
	GoVersion string // e.g. "go1.26.0"
}

// RegisterBuildInfo registers electd_build_info{version,revision,goversion}
// = 1 on reg. It describes the process, not an election: it has no election
// label, and a registry that has it already keeps it.
func RegisterBuildInfo(reg prometheus.Registerer, b BuildInfo) error {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "electd", Name: "build_info",
		Help:        "1, labelled with the version, VCS revision and Go version electd was built with.",
		ConstLabels: prometheus.Labels{"version": b.Version, "revision": b.Revision, "goversion": b.GoVersion}})
	g.Set(1)
	if err := reg.Register(g); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			return nil
		}
		return fmt.Errorf("register build info: %w", err)
	}
	return nil
}
