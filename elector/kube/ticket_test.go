package kube_test

import (
	"context"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/elector/kube"
	"github.com/electd/electd/internal/testenv"
)

// TestJoinAnswerLost: a ticket's create is made on the API server, but
// its answer is lost (a timeout, as under load). The retry must not leave
// a second ticket of the candidate's in line, which nobody would renew:
// it creates the same name, finds it taken, and adopts it. The candidate
// then leads on it when the leader resigns, and leaves no ticket behind.
func TestJoinAnswerLost(t *testing.T) {
	k := testenv.StartKube(t)
	h := &harness{k: k}
	ctx := context.Background()
	const el = "join-answer-lost"
	timing := elector.Timing{TTL: 2 * time.Second}
	a := candidateAt(t, h, h.Addr(), el, "a", timing)
	ra := electortest.MustLead(t, electortest.Campaign(ctx, a), 10*time.Second, "a")

	lg, _, err := kube.Clients(k.Config(k.AdminToken()))
	if err != nil {
		t.Fatal(err)
	}
	lose := &loseFirstTicket{LeasesGetter: lg, retried: make(chan struct{})}
	b, err := kube.New(kube.Config{Candidate: elector.Candidate{Election: el, ID: "b", Timing: timing, Logger: electortest.Logger()}, Leases: lose, Namespace: namespace})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	cb := electortest.Campaign(ctx, b)
	select {
	case <-lose.retried:
	case <-time.After(10 * time.Second):
		t.Fatal("b's join did not create its ticket again after the lost answer")
	}
	list, err := k.Client(t).CoordinationV1().Leases(namespace).List(ctx, metav1.ListOptions{LabelSelector: "electd.io/queue=" + el})
	if err != nil {
		t.Fatal(err)
	}
	var mine []string
	for _, l := range list.Items {
		if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == "b" {
			mine = append(mine, l.Name)
		}
	}
	if len(mine) != 1 {
		t.Fatalf("b's tickets after its retried join: %v, want one", mine)
	}
	electortest.StillWaiting(t, cb, "b")
	electortest.Resign(t, ra.Term)
	rb := electortest.MustLead(t, cb, 10*time.Second, "b")
	electortest.Resign(t, rb.Term)
	electortest.Eventually(t, 10*time.Second, "no ticket left", func() bool { return len(tickets(t, k, el)) == 0 })
}

// loseFirstTicket makes the first ticket create on the server and answers
// it with a timeout; retried is closed once the next create returned.
type loseFirstTicket struct {
	kube.LeasesGetter
	mu      sync.Mutex
	creates int
	retried chan struct{}
}

func (g *loseFirstTicket) Leases(ns string) kube.LeaseClient {
	return loseFirstTicketClient{LeaseClient: g.LeasesGetter.Leases(ns), g: g}
}

type loseFirstTicketClient struct {
	kube.LeaseClient
	g *loseFirstTicket
}

func (c loseFirstTicketClient) Create(ctx context.Context, l *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error) {
	got, err := c.LeaseClient.Create(ctx, l, opts)
	if _, ticket := l.Labels["electd.io/queue"]; !ticket {
		return got, err
	}
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	c.g.creates++
	switch c.g.creates {
	case 1:
		if err == nil {
			return nil, context.DeadlineExceeded
		}
	case 2:
		close(c.g.retried)
	}
	return got, err
}
