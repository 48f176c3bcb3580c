package kube_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/elector/kube"
	"github.com/electd/electd/internal/testenv"
)

// harness runs the suites on a real kube-apiserver, as its admin, in the
// namespace "default".
type harness struct {
	k  *testenv.Kube
	ns string // "" is namespace
	// shared, if set, hands each election's Lease to the test as a
	// client-go elector left it, and back to client-go after it.
	shared *sharedLeases
}

const namespace = "default"

func (h *harness) namespace() string {
	if h.ns == "" {
		return namespace
	}
	return h.ns
}

func (h *harness) Addr() string         { return strings.TrimPrefix(h.k.URL(), "https://") }
func (h *harness) Restart(t testing.TB) { h.k.Kill(t); h.k.Start(t) } // a crash: its state is in its etcd

func (h *harness) New(t testing.TB, c electortest.Candidate) elector.Locker {
	t.Helper()
	if h.shared != nil {
		h.shared.share(t, c.Election)
	}
	rc := h.k.Config(h.k.AdminToken())
	rc.Host = "https://" + c.StoreAddr
	leases, _, err := kube.Clients(rc)
	if err != nil {
		t.Fatal(err)
	}
	if c.Logger == nil {
		c.Logger = electortest.Logger()
	}
	el, err := kube.New(kube.Config{Candidate: c.Candidate, Leases: leases, Namespace: h.namespace()})
	if err != nil {
		t.Fatalf("new elector: %v", err)
	}
	t.Cleanup(func() { _ = el.Close() })
	return el
}

// Queued counts the tickets in line, and the holder if it has none.
func (h *harness) Queued(t testing.TB, election string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	leases := h.k.Client(t).CoordinationV1().Leases(h.namespace())
	list, err := leases.List(ctx, metav1.ListOptions{LabelSelector: "electd.io/queue=" + kube.LeaseName(election)})
	if err != nil {
		t.Fatalf("count tickets: %v", err)
	}
	n := len(list.Items)
	holders := map[string]bool{}
	for _, l := range list.Items {
		if l.Spec.HolderIdentity != nil {
			holders[*l.Spec.HolderIdentity] = true
		}
	}
	l, err := leases.Get(ctx, kube.LeaseName(election), metav1.GetOptions{})
	if err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" && !holders[*l.Spec.HolderIdentity] {
		n++
	}
	return n
}

func (h *harness) Capabilities() electortest.Capabilities {
	return electortest.Capabilities{NoSemaphore: "a Lease holds one term; k8s:// refuses --slots > 1"}
}

func TestConformance(t *testing.T) {
	electortest.Run(t, &harness{k: testenv.StartKube(t)})
}

func TestLockSuite(t *testing.T) {
	electortest.RunLock(t, &harness{k: testenv.StartKube(t)})
}
