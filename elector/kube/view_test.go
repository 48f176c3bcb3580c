package kube

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func lease(name, holder, version string, secs int32, ann map[string]string) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: version, Annotations: ann},
		Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: &secs}}
	if holder != "" {
		l.Spec.HolderIdentity = &holder
	}
	return l
}

func TestStateFree(t *testing.T) {
	t0 := time.Unix(1000, 0)
	held := &seen{obj: lease("e", "a", "10", 2, nil), rv: 10, at: t0, dur: 2 * time.Second}
	tests := []struct {
		name   string
		lease  *seen
		now    time.Time
		free   bool
		freeAt time.Time
	}{
		{name: "no lease", now: t0, free: true},
		{name: "no holder", lease: &seen{obj: lease("e", "", "9", 1, nil), rv: 9, at: t0}, now: t0, free: true},
		{name: "held, just seen", lease: held, now: t0, freeAt: t0.Add(2 * time.Second)},
		{name: "held, a moment before its duration", lease: held, now: t0.Add(2*time.Second - time.Nanosecond), freeAt: t0.Add(2 * time.Second)},
		{name: "held, unchanged for its duration", lease: held, now: t0.Add(2 * time.Second), free: true, freeAt: t0.Add(2 * time.Second)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			free, at := state{lease: tc.lease}.free(tc.now)
			if free != tc.free || !at.Equal(tc.freeAt) {
				t.Fatalf("free %v at %v, want %v at %v", free, at, tc.free, tc.freeAt)
			}
		})
	}
}

func TestStateHead(t *testing.T) {
	t0 := time.Unix(1000, 0)
	grace := 100 * time.Millisecond
	ticket := func(name, version, order string, at time.Time) seen {
		var ann map[string]string
		if order != "" {
			ann = map[string]string{annOrder: order}
		}
		return seen{obj: lease(name, "x", version, 2, ann), rv: mustRV(t, version), at: at}
	}
	tests := []struct {
		name     string
		tickets  []seen
		now      time.Time
		head     string
		dead     int
		headDead time.Time
	}{
		{name: "empty line"},
		{name: "by creation, not by last renewal", now: t0, tickets: []seen{
			ticket("e.q-b", "30", "20", t0), ticket("e.q-a", "25", "", t0), ticket("e.q-c", "40", "10", t0),
		}, head: "e.q-c", headDead: t0.Add(2*time.Second + grace)},
		{name: "a dead head is skipped", now: t0.Add(3 * time.Second), tickets: []seen{
			ticket("e.q-old", "10", "10", t0), ticket("e.q-new", "50", "20", t0.Add(2*time.Second)),
		}, head: "e.q-new", dead: 1, headDead: t0.Add(4*time.Second + grace)},
		{name: "all dead", now: t0.Add(5 * time.Second), tickets: []seen{ticket("e.q-a", "10", "", t0)}, dead: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, dead, at := state{tickets: tc.tickets}.head(tc.now, grace)
			name := ""
			if h != nil {
				name = h.obj.Name
			}
			if name != tc.head || len(dead) != tc.dead || !at.Equal(tc.headDead) {
				t.Fatalf("head %q, %d dead, head dead at %v; want %q, %d, %v", name, len(dead), at, tc.head, tc.dead, tc.headDead)
			}
		})
	}
}

func mustRV(t *testing.T, s string) uint64 {
	t.Helper()
	n, err := rv(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestHolderOf(t *testing.T) {
	tests := []struct {
		name  string
		lease *coordinationv1.Lease
		id    string
		token uint64
	}{
		{name: "electd holder", lease: lease("e", "a", "5", 2, map[string]string{annToken: "7", annHolder: "a"}), id: "a", token: 7},
		{name: "client-go holder after electd's term", lease: lease("e", "cg", "9", 2, map[string]string{annToken: "7", annHolder: "a"}), id: "cg"},
		{name: "released", lease: lease("e", "", "9", 1, map[string]string{annToken: "7", annHolder: "a"})},
		{name: "none"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := holderOf(tc.lease)
			if got.ID != tc.id || got.Token != tc.token {
				t.Fatalf("got %+v, want id %q token %d", got, tc.id, tc.token)
			}
		})
	}
}
