package redis

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
)

// TestPendingGrantIsNoLeader: under Sentinel with no replica left, a
// grant is written on the master but its WAIT fails, so the candidate's
// Campaign returns no term, and retries. Before grants were pending until
// their holder renewed them, every copy's view (/leader) named that
// candidate, which did not lead. Neither Observe nor Leader, on a watcher
// or on the candidate itself, may name it; once a replica is back, the
// candidate leads and both name it.
func TestPendingGrantIsNoLeader(t *testing.T) {
	tests := []struct {
		name  string
		slots int
	}{
		{name: "a term", slots: 1},
		{name: "a semaphore's slot", slots: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { testPendingGrant(t, tt.slots) })
	}
}

func testPendingGrant(t *testing.T, slots int) {
	h := sentinelHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	master := h.sentinel.Master(t)
	for _, n := range h.sentinel.Nodes() {
		if n.Addr() != master {
			n.Kill(t)
		}
	}

	const election = "pending"
	inst := &countingInstrument{}
	a := h.New(t, electortest.Candidate{StoreAddr: h.Addr(), Candidate: elector.Candidate{
		Election: election, ID: "a", Timing: testTiming(), Slots: slots, Instrument: inst}})
	w := h.New(t, electortest.Candidate{StoreAddr: h.Addr(), Candidate: elector.Candidate{
		Election: election, ID: "w", Timing: testTiming(), Slots: slots}})
	seen := w.Observe(ctx)
	ca := electortest.Campaign(ctx, a)

	unreplicated := func() int {
		n := 0
		for k, v := range inst.snapshot() {
			if strings.HasSuffix(k, " unreplicated") {
				n += v
			}
		}
		return n
	}
	// The grant comes one TTL after the server's first use (the epoch);
	// then every step of a's is unreplicated.
	electortest.Eventually(t, 10*time.Second, "a grant to a on the master", func() bool {
		if slots > 1 {
			n, _ := h.cli.HLen(ctx, keysFor(election).holders).Result()
			return n == 1
		}
		entry, _ := h.cli.HGet(ctx, keysFor(election).term, "entry").Result()
		return strings.HasPrefix(entry, "a#")
	})
	n := unreplicated()
	electortest.Eventually(t, 10*time.Second, "2 more of a's steps unreplicated", func() bool { return unreplicated() >= n+2 })
	electortest.StillWaiting(t, ca, "a")
	for _, e := range []elector.Elector{w, a} {
		if l, err := e.Leader(ctx); err == nil {
			t.Errorf("Leader names %s (token %d), whose campaign has no term", l.ID, l.Token)
		}
	}
	if q, err := a.(elector.Queuer).Queue(ctx); err != nil {
		t.Errorf("Queue: %v", err)
	} else {
		for _, c := range q.Candidates {
			if c.Holder {
				t.Errorf("Queue (electd status) shows %s holding (token %d), whose campaign has no term", c.ID, c.Token)
			}
		}
	}
	for drained := false; !drained; {
		select {
		case l := <-seen:
			if l.ID != "" {
				t.Errorf("Observe named %s (token %d), whose campaign has no term", l.ID, l.Token)
			}
		default:
			drained = true
		}
	}

	h.sentinel.Start(t) // the replicas are back
	ra := electortest.MustLead(t, ca, 10*time.Second, "a")
	electortest.Eventually(t, 5*time.Second, "the watcher to name a", func() bool {
		l, err := w.Leader(ctx)
		return err == nil && l.ID == "a" && l.Token == ra.Term.Leader.Token
	})
	if l, err := a.Leader(ctx); err != nil || l.ID != "a" {
		t.Errorf("a's own Leader after its campaign returned: %+v, %v", l, err)
	}
	for named := false; !named; {
		select {
		case l := <-seen:
			named = l.ID == "a" && l.Token == ra.Term.Leader.Token
		case <-time.After(5 * time.Second):
			t.Fatal("Observe did not name a once it led")
		}
	}
	electortest.Resign(t, ra.Term)
}
