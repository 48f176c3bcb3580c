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
