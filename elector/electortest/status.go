package electortest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/elector"
)

// want is one candidate as the status test expects it in the line: its
// id, and the token it holds with (0: it waits).
type want struct {
	id    string
	token uint64
}

// lineOf reads e's election's line; e must be an elector.Queuer.
func lineOf(t testing.TB, e elector.Elector) (elector.Queue, error) {
	t.Helper()
	q, ok := e.(elector.Queuer)
	if !ok {
		t.Fatalf("%T is not an elector.Queuer", e)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return q.Queue(ctx)
}

// describe renders a line for a failure message.
func describe(q elector.Queue) string {
	var b strings.Builder
	fmt.Fprintf(&b, "slots %d:", q.Slots)
	for _, c := range q.Candidates {
		fmt.Fprintf(&b, " %s(order %d, holder %t, token %d, address %q)", c.ID, c.Order, c.Holder, c.Token, c.Address)
	}
	return b.String()
}

// lineIs reports whether q lists exactly ws, in that order, in strictly
// growing order marks, the holders (token != 0) flagged with their token
// and advertised address, the others waiting.
func lineIs(q elector.Queue, slots int, ws []want) bool {
	if q.Slots != slots || len(q.Candidates) != len(ws) {
		return false
	}
	for i, c := range q.Candidates {
		w := ws[i]
		if c.ID != w.id || c.Holder != (w.token != 0) || (i > 0 && c.Order <= q.Candidates[i-1].Order) {
			return false
		}
		if w.token != 0 && (c.Token != w.token || c.Address != "http://"+w.id+".test:4040") {
			return false
		}
	}
	return len(q.Holders()) <= slots
}

// waitLine waits until e reads the line ws.
func waitLine(t testing.TB, e elector.Elector, slots int, what string, ws ...want) {
	t.Helper()
	var last elector.Queue
	var lastErr error
	deadline := time.Now().Add(10 * time.Second)
	for {
		last, lastErr = lineOf(t, e)
		if lastErr == nil && lineIs(last, slots, ws) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: want %v, read %s (err %v)", what, ws, describe(last), lastErr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testStatus: the line shows the candidates in order of arrival, the
// holder flagged with its token; after it resigns, the next holds with
// its own token and the last has moved up. A reader that never
// campaigned reads the same.
func testStatus(t *testing.T, h Harness) {
	el := uniqueElection(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reader := candidate(t, h, el, "reader", 2*time.Second)
	waitLine(t, reader, 1, "an empty election")
	ids := []string{"a", "b", "c"}
	chans := make([]<-chan Result, len(ids))
	for i, id := range ids {
		chans[i] = Campaign(ctx, candidate(t, h, el, id, 2*time.Second))
		waitQueued(t, h, el, i+1)
	}
	ra := MustLead(t, chans[0], 10*time.Second, "a")
	waitLine(t, reader, 1, "a leads, b and c wait", want{"a", ra.Term.Token}, want{"b", 0}, want{"c", 0})
	Resign(t, ra.Term)
	rb := MustLead(t, chans[1], 10*time.Second, "b")
	waitLine(t, reader, 1, "after a resigned", want{"b", rb.Term.Token}, want{"c", 0})
	StillWaiting(t, chans[2], "c")
	Resign(t, rb.Term)
	rc := MustLead(t, chans[2], 10*time.Second, "c")
	waitLine(t, reader, 1, "after b resigned", want{"c", rc.Term.Token})
	Resign(t, rc.Term)
	waitLine(t, reader, 1, "after c resigned")
}

// testStatusSemaphore: of four candidates of a 3-slot semaphore the first
// three are shown holding, each with its token, and the fourth waiting;
// when the second releases, the fourth holds in its place.
func testStatusSemaphore(t *testing.T, h Harness) {
	const slots = 3
	el := uniqueElection(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ids := []string{"a", "b", "c", "d"}
	chans := make([]<-chan Result, len(ids))
	cands := make([]elector.Locker, len(ids))
	for i, id := range ids {
		cands[i] = slotted(t, h, el, id, 2*time.Second, slots)
		chans[i] = Campaign(ctx, cands[i])
		waitQueued(t, h, el, i+1)
	}
	terms := make([]*elector.Term, len(ids))
	for i := range slots {
		terms[i] = MustLead(t, chans[i], 10*time.Second, ids[i]).Term
	}
	StillWaiting(t, chans[3], "d")
	waitLine(t, cands[3], slots, "a, b, c hold, d waits",
		want{"a", terms[0].Token}, want{"b", terms[1].Token}, want{"c", terms[2].Token}, want{"d", 0})
	Resign(t, terms[1])
	terms[3] = MustLead(t, chans[3], 10*time.Second, "d").Term
	waitLine(t, cands[0], slots, "after b released",
		want{"a", terms[0].Token}, want{"c", terms[2].Token}, want{"d", terms[3].Token})
	for _, i := range []int{0, 2, 3} {
		Resign(t, terms[i])
	}
}
