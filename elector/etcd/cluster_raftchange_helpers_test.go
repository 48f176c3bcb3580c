package etcd_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
)

// Set-up shared by the fault tests of a raft leader change
// (cluster_raftchange_test.go, cluster_lb_test.go,
// cluster_snapshot_test.go): a leads with b queued behind it, raft
// leadership moves from m0 to m1 and m0 is cut off as soon as m1 leads,
// and the wait for b's term.

const (
	// pinnedRenew is a's renewal interval (and b's): renewals reach m0
	// throughout the time it still acknowledges them after the cut.
	pinnedRenew = 100 * time.Millisecond
	// transferDelay slows m0's peer links, one way, so that the cut can be
	// placed between m1 leading and m0 hearing of it: m1's first messages
	// of its new term reach m0 this long after they are sent.
	transferDelay = 150 * time.Millisecond
	// moveTimeout bounds the MoveLeader asked of m0, which returns once m0
	// follows m1: after the heal.
	moveTimeout = 30 * time.Second
	// raftTrials is how many times each test runs its fault.
	raftTrials = 3
)

// raftPinned is the set-up of the tests below.
type raftPinned struct {
	terms *electortest.Terms
	lead  electortest.Span // a's term
	a, b  *cand
	m     [3]int // m[0] leads raft; b dials m[1] and m[2]
}

// pinnedToRaftLeader makes a lead, pinned to the raft leader m0, and b
// queue behind it, on the other two members. Both renew every pinnedRenew.
func (h *clusterHarness) pinnedToRaftLeader(t *testing.T) raftPinned {
	t.Helper()
	m0 := h.c.Leader(t)
	s := raftPinned{m: [3]int{m0, (m0 + 1) % 3, (m0 + 2) % 3}}
	tm := elector.Timing{TTL: faultTTL, RenewInterval: pinnedRenew}
	s.a = h.candidateOn(t, "a", tm, s.m[0])
	s.b = h.candidateOn(t, "b", tm, s.m[1], s.m[2])
	s.terms, s.lead = h.aLeadsBQueued(t, s.a, s.b, m0)
	return s
}

// aLeadsBQueued starts the campaign loops of a and then b, waits until a
// leads with b queued behind it, makes m0 the raft leader again (if a
// loaded host had a raft election meanwhile) and waits for a's first
// renewal.
func (h *clusterHarness) aLeadsBQueued(t *testing.T, a, b *cand, m0 int) (*electortest.Terms, electortest.Span) {
	t.Helper()
	aLeads := make(chan struct{})
	terms := electortest.CampaignLoop(t, a.e, queuedAfter{b.e, aLeads})
	lead := terms.WaitLeading(t, firstLeader)
	close(aLeads)
	if lead.ID != "a" {
		t.Fatalf("%s leads, want a: b campaigns only once a leads", lead.ID)
	}
	electortest.Eventually(t, firstLeader, "b queued behind a", func() bool { return h.Queued(t, electionOf(t)) == 2 })
	h.moveRaftLeader(t, m0)
	renewed(t, lead.Term)
	return terms, lead
}

// pinConn is the balancer's connection that carries a's pin (see
// balancedLeadsBQueued).
const pinConn = 1

// balancedLeadsBQueued makes a, dialing the cluster through lb alone (its
// member: the one lb leads to, -1 if none), lead, with b on m1 and m2
// queued behind it (aLeadsBQueued); both renew every renewEvery. a's
// balanced client opened lb's first connection (its grant); its pin, the
// second, at its first renewal.
func (h *clusterHarness) balancedLeadsBQueued(t *testing.T, lb *memberLB, member int, renewEvery time.Duration, m0, m1, m2 int) (*cand, *electortest.Terms, electortest.Span) {
	t.Helper()
	tm := elector.Timing{TTL: faultTTL, RenewInterval: renewEvery}
	a := &cand{errs: &storeErrors{}, member: member}
	a.e = h.dial(t, candidateOf(t, "a", tm, a.errs), lb.Addr())
	b := h.candidateOn(t, "b", tm, m1, m2)
	terms, lead := h.aLeadsBQueued(t, a, b, m0)
	if n := lb.Conns(); n != 2 {
		t.Fatalf("the balancer saw %d connections from a, want 2 (client, pin): %v", n, lb.Log())
	}
	return a, terms, lead
}

// queuedAfter is an Elector whose campaigns begin once first is closed.
type queuedAfter struct {
	elector.Elector
	first <-chan struct{}
}

func (q queuedAfter) Campaign(ctx context.Context) (*elector.Term, error) {
	select {
	case <-q.first:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return q.Elector.Campaign(ctx)
}

// raftTransfer is raft leadership moved from m0 to m1 (MoveLeader, asked
// of m0, with m0's peer links slowed by transferDelay) and m0 cut off from
// its peers as soon as m1 leads, before m0 hears of m1's term.
type raftTransfer struct {
	m0, m1          int
	id0, id1, term0 uint64 // m0's and m1's member ids, m0's raft term before
	asked           time.Time
	before          time.Time // m1 led after this: the last poll that said otherwise was sent then
	cut             time.Time
	moved           chan error
	moveErr         error
	moveDone        bool
}

// transferThenCut moves raft leadership from m0 to m1 and cuts m0 off as
// soon as m1 leads. onMoved, if not nil, is called if MoveLeader returns
// while m1 is awaited.
func (h *clusterHarness) transferThenCut(t *testing.T, m0, m1 int, onMoved func(error)) *raftTransfer {
	t.Helper()
	ctx := context.Background()
	st0, err := h.c.Status(ctx, m0)
	if err != nil {
		t.Fatal(err)
	}
	st1, err := h.c.Status(ctx, m1)
	if err != nil {
		t.Fatal(err)
	}
	r := &raftTransfer{m0: m0, m1: m1, id0: st0.Header.MemberId, id1: st1.Header.MemberId, term0: st0.Header.RaftTerm}
	mover := h.c.Client(t, m0)
	t.Cleanup(func() {
		h.c.Heal(m0)
		h.c.SetPeerDelay(m0, 0)
	})

	h.c.SetPeerDelay(m0, transferDelay)
	mctx, mcancel := context.WithTimeout(ctx, moveTimeout)
	t.Cleanup(mcancel)
	r.moved = make(chan error, 1)
	r.asked = time.Now()
	go func() {
		_, err := mover.MoveLeader(mctx, r.id1)
		r.moved <- err
	}()
	// m1 answers Status alone, as soon as it leads; it led after the last
	// poll that said otherwise was sent.
	electortest.Eventually(t, raftElection+slack, fmt.Sprintf("m%d to lead raft", m1), func() bool {
		select {
		case r.moveErr = <-r.moved:
			r.moveDone = true
			if onMoved != nil {
				onMoved(r.moveErr)
			}
		default:
		}
		sent := time.Now()
		if st, err := h.c.Status(ctx, m1); err == nil && st.Leader == r.id1 {
			return true
		}
		r.before = sent
		return false
	})
	r.cut = time.Now()
	h.c.Partition(m0)
	return r
}

// heard says whether m0 had heard of m1's term by now ("unknown" if it
// does not answer): if it had, it stepped down.
func (r *raftTransfer) heard(h *clusterHarness) string {
	if st, err := h.c.Status(context.Background(), r.m0); err == nil {
		return fmt.Sprint(st.Leader != r.id0 || st.Header.RaftTerm != r.term0)
	}
	return "unknown"
}

// moveResult waits for MoveLeader to return (once m0 follows m1: after
// the heal), unless it already had, and gives its error.
func (r *raftTransfer) moveResult(t *testing.T) error {
	t.Helper()
	if !r.moveDone {
		select {
		case r.moveErr = <-r.moved:
			r.moveDone = true
		case <-time.After(moveTimeout + slack):
			t.Fatalf("MoveLeader asked of m%d did not return within %s", r.m0, moveTimeout+slack)
		}
	}
	return r.moveErr
}

// end lifts m0's delay and heals it, waits for MoveLeader's answer, and
// stops the terms; it returns their spans, those of lead and next among
// them, and MoveLeader's error.
func (r *raftTransfer) end(t *testing.T, h *clusterHarness, terms *electortest.Terms, lead, next electortest.Span) (spans []electortest.Span, old, nxt electortest.Span, moveErr error) {
	t.Helper()
	h.c.SetPeerDelay(r.m0, 0)
	h.heal(t, r.m0)
	moveErr = r.moveResult(t)
	spans = terms.Stop(t)
	return spans, electortest.SpanOf(t, spans, lead.Token), electortest.SpanOf(t, spans, next.Token), moveErr
}

// succeeded waits for the term that starts after cut, for lead's term to
// end, and for the successor's first renewal; it returns the successor
// and high's reading of lead's latest ValidUntil.
func succeeded(t *testing.T, terms *electortest.Terms, lead electortest.Span, cut time.Time, high func() time.Time) (electortest.Span, time.Time) {
	t.Helper()
	next := terms.WaitStarted(t, cut, raftChangeBound(faultTTL))
	electortest.Eventually(t, window(faultTTL)+slack, "a's term to end", func() bool { return lead.Term.Err() != nil })
	vu := high()
	renewed(t, next.Term)
	return next, vu
}
