package zk_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/testenv"
)

// TestCampaignNextInLineStartsAtOnce: the candidate next in line reads its
// own node while it waits (warmEvery), so when the leader resigns its
// term's first deadline counts from such a read, answered lag before its
// write, and it leads without the proof's wait of lag (170ms at the
// servers' 200ms tick) after the write.
func TestCampaignNextInLineStartsAtOnce(t *testing.T) {
	const lag = 170 * time.Millisecond
	srv := testenv.StartZK(t)
	h := &harness{single: srv}
	timing := elector.Timing{TTL: 2 * time.Second} // renewals every 400ms: a read every 115ms
	var took []time.Duration
	for round := range 5 {
		name := fmt.Sprintf("fast-%d", round)
		a := h.New(t, electortest.Candidate{StoreAddr: h.Addr(), Candidate: elector.Candidate{Election: name, ID: "a", Timing: timing}})
		b := h.New(t, electortest.Candidate{StoreAddr: h.Addr(), Candidate: elector.Candidate{Election: name, ID: "b", Timing: timing}})
		ra := electortest.MustLead(t, electortest.Campaign(context.Background(), a), 10*time.Second, "a")
		cb := electortest.Campaign(context.Background(), b)
		electortest.Eventually(t, 10*time.Second, "b queued", func() bool { return h.Queued(t, name) == 2 })
		queued := time.Now()
		// Three of b's reads' periods, the time the mechanism needs.
		electortest.Eventually(t, 5*time.Second, "b has read its node a few times", func() bool { return time.Since(queued) > 3*115*time.Millisecond })
		resigned := time.Now()
		electortest.Resign(t, ra.Term)
		rb := electortest.MustLead(t, cb, 5*time.Second, "b")
		took = append(took, rb.At.Sub(resigned))
		electortest.Resign(t, rb.Term)
	}
	slices.Sort(took)
	t.Logf("resign → the successor leads: %v", took)
	if med := took[len(took)/2]; med >= lag {
		t.Fatalf("median handover %s: the successor waited lag (%s) for a proof", med, lag)
	}
}
