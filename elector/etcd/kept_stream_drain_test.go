package etcd_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/electd/electd/elector"
)

// TestKeptStreamDrainingMemberBehindBalancer: electd reaches the cluster
// through one balanced address (a gateway, a Service, HAProxy: one pin),
// and the member its pin reaches is stopped the ordinary way (SIGTERM, a
// rolling restart or upgrade). etcd drains first: gRPC's GracefulStop sends
// GOAWAY and lets the streams under way run on, for up to its request
// timeout (5 s + 2 election timeouts: 6 s here), while the member still
// serves them. The pin's connection opens a new transport for every new
// request, which the balancer sends to another member; the renewals' kept
// LeaseKeepAlive stream stays on the old transport, answered by the
// draining member. Every renewal is then answered by one member and proved
// through another: errUnproved, and the stream is kept, so the retry and
// every next attempt go out on it again, until the drain ends. A stream
// per renewal went on the new transport and was proved there.
//
// Asserted: the leader's term outlives the member's stop (TTL 3 s, well
// above a renewal interval of 200 ms and the cluster's raft timing).
func TestKeptStreamDrainingMemberBehindBalancer(t *testing.T) {
	h := newClusterHarness(t)
	lead := h.c.Leader(t)
	ma, mb := (lead+1)%3, (lead+2)%3 // two followers: no raft election
	ep := func(m int) string { return h.c.Members()[m].Endpoint() }
	lb := startMemberLB(t, lbRoute{name: fmt.Sprintf("m%d", ma), to: ep(ma)})

	const ttl = 3 * time.Second
	errs := &storeErrors{}
	e := h.dial(t, candidateOf(t, "a", elector.Timing{TTL: ttl, RenewInterval: 200 * time.Millisecond}, errs), lb.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	term, err := e.Campaign(ctx)
	if err != nil {
		t.Fatalf("campaign: %v", err)
	}
	renewed(t, term)
	renewed(t, term) // the renewals' stream is open on m_a, and kept

	// From now on every new connection reaches m_b; m_a drains and stops.
	lb.Plan(lbRoute{name: fmt.Sprintf("m%d", mb), to: ep(mb)})
	began := time.Now()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		h.c.Members()[ma].Stop(t)
	}()
	t.Cleanup(func() { <-stopped })

	select {
	case <-term.Done():
		ended := time.Since(began)
		<-stopped
		t.Fatalf("the term ended %s after m%d began to drain (its stop took %s): %v; renewal errors %v; balancer %v",
			elapsed(ended), ma, elapsed(time.Since(began)), term.Err(), errs.snapshot(), lb.Log())
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("m_a did not stop within 30 s")
	}
	drained := time.Since(began)
	renewed(t, term)
	t.Logf("m%d drained and stopped in %s; the term held; renewal errors %v; balancer %v", ma, elapsed(drained), errs.snapshot(), lb.Log())
}
