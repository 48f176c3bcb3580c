package kube

import (
	"fmt"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/electd/electd/elector"
)

// The annotations and labels electd writes on Leases. client-go's
// LeaseLock keeps an object's metadata when it updates the spec, so a
// term of a client-go elector on the same Lease leaves them in place
// (stale: its holder then is not the one they describe, see holderOf).
const (
	annToken    = "electd.io/fencing-token"
	annAddress  = "electd.io/address"
	annHolder   = "electd.io/token-holder" // the holderIdentity the token was granted to
	annOrder    = "electd.io/order"        // a ticket's place in line
	annReleased = "electd.io/released"     // the token of the term whose holder released the Lease, after it ended
	annHandover = "electd.io/handover-to"  // the ticket a resigning holder handed the Lease to
	annRun      = "electd.io/run"          // a run record (electd lock --once-per)
	annRunLapse = "electd.io/run-lapse"    // when it lapses, RFC 3339
	labelQueue  = "electd.io/queue"        // a ticket's election
)

// ticketPrefix and runSuffix name an election's other Leases: dots, which
// an election name (a DNS label) never has, keep them apart from every
// election's own Lease.
func ticketPrefix(election string) string { return election + ".q-" }
func runName(election string) string      { return election + ".run" }

// rv parses a resourceVersion. The API server's etcd storage gives numbers
// that grow with every write to any Lease; the fencing tokens rest on that.
func rv(s string) (uint64, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("resourceVersion %q is not a positive number: electd's fencing tokens need the API server's etcd storage", s)
	}
	return n, nil
}

// seconds is a Lease's duration, in whole seconds (Config.validate).
func seconds(d time.Duration) *int32 {
	s := int32(d / time.Second)
	return &s
}

// duration is the Lease's duration; 0 when it has none.
func duration(l *coordinationv1.Lease) time.Duration {
	if l.Spec.LeaseDurationSeconds == nil {
		return 0
	}
	return time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
}

func holder(l *coordinationv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// holderOf is the leader a Lease names: its holder, with the fencing
// token and address electd wrote for that holder (a client-go holder has
// none: token 0), and since its acquireTime. Zero when nobody holds it.
func holderOf(l *coordinationv1.Lease) elector.Leader {
	id := holder(l)
	if id == "" {
		return elector.Leader{}
	}
	ld := elector.Leader{ID: id}
	if l.Annotations[annHolder] == id {
		ld.Token, _ = strconv.ParseUint(l.Annotations[annToken], 10, 64)
		ld.Address = l.Annotations[annAddress]
	}
	if l.Spec.AcquireTime != nil {
		ld.Since = l.Spec.AcquireTime.Time
	}
	return ld
}

// grant turns l (a copy of the Lease as observed, or a new one) into this
// candidate's term with token: the holder, the duration, the acquire and
// renew times, one more transition.
func grant(l *coordinationv1.Lease, self elector.Leader, ttl time.Duration, now time.Time) {
	prev := holder(l)
	id := self.ID
	l.Spec.HolderIdentity = &id
	l.Spec.LeaseDurationSeconds = seconds(ttl)
	t := metav1.NewMicroTime(now)
	l.Spec.AcquireTime, l.Spec.RenewTime = &t, &t
	if prev != id {
		n := int32(0)
		if l.Spec.LeaseTransitions != nil {
			n = *l.Spec.LeaseTransitions + 1
		}
		l.Spec.LeaseTransitions = &n
	}
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[annToken] = strconv.FormatUint(self.Token, 10)
	l.Annotations[annHolder] = id
	if self.Address != "" {
		l.Annotations[annAddress] = self.Address
	} else {
		delete(l.Annotations, annAddress)
	}
	delete(l.Annotations, annHandover)
	delete(l.Annotations, annReleased)
}

// handOver names the owner of ticket next as l's holder, with token: the
// term that owner claims (Elector.claim). Its address is not known here.
func handOver(l *coordinationv1.Lease, next *coordinationv1.Lease, token uint64, ttl time.Duration, now time.Time) {
	grant(l, elector.Leader{ID: holder(next), Token: token}, ttl, now)
	l.Annotations[annHandover] = next.Name
}

// renew sets l's renewTime, and its duration to ttl: a holder's
// renewal restores its duration if someone shortened it, and a claim
// writes the claimer's (the hand-over wrote the resigning holder's).
func renew(l *coordinationv1.Lease, ttl time.Duration, now time.Time) {
	if l.Spec.RenewTime != nil && now.Before(l.Spec.RenewTime.Time) {
		// The wall clock stepped back: never write an earlier renewTime
		// (a record a client-go elector saw before could come back).
		now = l.Spec.RenewTime.Time
	}
	t := metav1.NewMicroTime(now)
	l.Spec.RenewTime = &t
	l.Spec.LeaseDurationSeconds = seconds(ttl)
}

// goRecord is the Lease as a client-go elector compares it: its
// LeaderElectionRecord, whose times count in whole seconds. client-go
// times a holder from the moment it first sees a record different from
// the last one it saw; two renewals in one second look the same to it.
func goRecord(l *coordinationv1.Lease) string {
	sec := func(t *metav1.MicroTime) int64 {
		if t == nil {
			return 0
		}
		return t.Unix()
	}
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	var dur, trans int32
	if l.Spec.LeaseDurationSeconds != nil {
		dur = *l.Spec.LeaseDurationSeconds
	}
	if l.Spec.LeaseTransitions != nil {
		trans = *l.Spec.LeaseTransitions
	}
	var strategy string
	if l.Spec.Strategy != nil {
		strategy = string(*l.Spec.Strategy)
	}
	return fmt.Sprintf("%q %d %d %d %d %q %q", holder(l), dur, sec(l.Spec.AcquireTime), sec(l.Spec.RenewTime), trans,
		strategy, str(l.Spec.PreferredHolder))
}

// release clears l's holder as client-go's ReleaseOnCancel does (a
// duration of one second, the times now), so that both electd and
// client-go electors take it at once.
//
// It marks the release as electd's (annReleased, the ended term's token):
// waiters take a Lease so released at once, while one cleared by anyone
// else (kubectl, client-go's ReleaseOnCancel) is timed for its last
// holder's duration (view.go, observe), since that holder may be cut off
// and still counting.
func release(l *coordinationv1.Lease, now time.Time) {
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[annReleased] = releaseMark(l)
	l.Spec.HolderIdentity = nil
	delete(l.Annotations, annHandover)
	l.Spec.LeaseDurationSeconds = seconds(time.Second)
	t := metav1.NewMicroTime(now)
	l.Spec.AcquireTime, l.Spec.RenewTime = &t, &t
}

// released reports whether l is empty because electd's holder released it
// after its term ended (release): the mark names the Lease's transitions,
// so that a mark left behind by a later holder that does not know it (a
// client-go elector keeps annotations) names an older count and is no
// mark.
func released(l *coordinationv1.Lease) bool {
	m, ok := l.Annotations[annReleased]
	return ok && holder(l) == "" && m == releaseMark(l)
}

// releaseMark is the released mark of l: its token and its transitions.
func releaseMark(l *coordinationv1.Lease) string {
	var n int32
	if l.Spec.LeaseTransitions != nil {
		n = *l.Spec.LeaseTransitions
	}
	return fmt.Sprintf("%s/%d", l.Annotations[annToken], n)
}
