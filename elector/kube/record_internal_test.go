package kube

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestGoRecordComparesPreferredHolderAndStrategyByValue: goRecord must
// give the same string for two copies of one Lease (client-go compares
// the JSON of the values). With spec.preferredHolder or spec.strategy set
// it prints their pointers, so every renewal looks like a new record to
// held.renewed, which then counts it from its own send time.
func TestGoRecordComparesPreferredHolderAndStrategyByValue(t *testing.T) {
	id, p := "a", "a"
	s := coordinationv1.CoordinatedLeaseStrategy("OldestEmulationVersion")
	now := metav1.NewMicroTime(time.Now())
	l := &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: &id, LeaseDurationSeconds: seconds(2 * time.Second),
		AcquireTime: &now, RenewTime: &now, PreferredHolder: &p, Strategy: &s}}
	if a, b := goRecord(l), goRecord(l.DeepCopy()); a != b {
		t.Errorf("goRecord of two copies of one Lease differ: %q vs %q", a, b)
	}
	h := &held{record: goRecord(l), since: now.Time}
	c := l.DeepCopy()
	send := now.Time.Add(10 * time.Millisecond)
	if got := h.renewed(c, send); !got.Equal(now.Time) {
		t.Errorf("a renewal that wrote the same record counts from %s, want the record's first write %s (%s later)",
			got.Format("15:04:05.000"), now.Time.Format("15:04:05.000"), got.Sub(now.Time))
	}
}

// TestRenewalCountsFromAWriteThatMayHaveLanded: a renewal whose answer was
// lost may have landed, and a client-go elector may time its record from
// then: a later acknowledged write of the same record counts from the
// lost one's send time; one of another record from its own.
func TestRenewalCountsFromAWriteThatMayHaveLanded(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }
	l := func(renew time.Time) *coordinationv1.Lease {
		obj := lease("e", "a", "1", 2, nil)
		renewTime := metav1.NewMicroTime(renew)
		obj.Spec.RenewTime = &renewTime
		return obj
	}
	tests := []struct {
		name      string
		lost      time.Time // the lost write's send time (and renewTime)
		ack       time.Time // the acknowledged one's
		wantSince time.Time
	}{
		{name: "same second: from the lost write", lost: at(1.1), ack: at(1.5), wantSince: at(1.1)},
		{name: "next second: from its own", lost: at(1.1), ack: at(2.1), wantSince: at(2.1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := &held{lease: l(t0), record: goRecord(l(t0)), since: t0}
			h.sent(l(tc.lost), tc.lost)
			if got := h.renewed(l(tc.ack), tc.ack); !got.Equal(tc.wantSince) {
				t.Fatalf("counts from %s, want %s", got.Sub(t0), tc.wantSince.Sub(t0))
			}
		})
	}
}

// TestRenewNeverWritesAnEarlierRenewTime: with the wall clock stepped
// back, a renewal keeps the renewTime it wrote last.
func TestRenewNeverWritesAnEarlierRenewTime(t *testing.T) {
	obj := lease("e", "a", "1", 2, nil)
	last := metav1.NewMicroTime(time.Unix(2000, 0))
	obj.Spec.RenewTime = &last
	renew(obj, 2*time.Second, time.Unix(1990, 0))
	if !obj.Spec.RenewTime.Time.Equal(last.Time) {
		t.Fatalf("renewTime %s after a step back, want %s kept", obj.Spec.RenewTime.Time, last.Time)
	}
}
