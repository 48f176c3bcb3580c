package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
)

// Helpers of the fault tests on a real etcd cluster (cluster_test.go).

// How a candidate dials the cluster.
type dialMode int

const (
	allMembers dialMode = iota // etcd://m1,m2,m3
	pinned                     // the i-th candidate dials member i alone
	proxied                    // all three, each through a fault proxy of its own
)

// cand is one candidate of a fault test.
type cand struct {
	e      elector.Elector
	errs   *storeErrors
	member int         // pinned: the member it dials
	links  memberLinks // proxied: its proxies, by member
}

type cands map[string]*cand

// electionOf is the election of a test's candidates, named after it.
func electionOf(t *testing.T) string {
	return strings.NewReplacer("/", "-", " ", "-", ",", "").Replace(t.Name())
}

// candidateOf is candidate id of the test's election, with timing tm,
// counting its store errors in errs.
func candidateOf(t *testing.T, id string, tm elector.Timing, errs *storeErrors) elector.Candidate {
	return elector.Candidate{Election: electionOf(t), ID: id, Address: "http://" + id + ".test", Timing: tm, Instrument: errs}
}

// candidates makes one candidate per id, each on its own connection, in
// an election named after the test.
func (h *clusterHarness) candidates(t *testing.T, mode dialMode, ttl time.Duration, ids ...string) cands {
	t.Helper()
	out := cands{}
	for i, id := range ids {
		c := &cand{errs: &storeErrors{}, member: -1}
		ec := candidateOf(t, id, timingOf(ttl), c.errs)
		switch mode {
		case allMembers:
			c.e = h.dial(t, ec, h.c.Endpoints()...)
		case pinned:
			c.member = i % len(h.c.Members())
			c.e = h.dial(t, ec, h.c.Members()[c.member].Endpoint())
		case proxied:
			c.e, c.links = h.cuttable(t, ec)
		}
		out[id] = c
	}
	return out
}

// candidateOn makes candidate id of the test's election, with timing tm,
// on a connection of its own to the given members alone (as electd dials
// etcd://THOSE). With one member, that is its member.
func (h *clusterHarness) candidateOn(t *testing.T, id string, tm elector.Timing, members ...int) *cand {
	t.Helper()
	c := &cand{errs: &storeErrors{}, member: -1}
	if len(members) == 1 {
		c.member = members[0]
	}
	var hosts []string
	for _, m := range members {
		hosts = append(hosts, h.c.Members()[m].Endpoint())
	}
	c.e = h.dial(t, candidateOf(t, id, tm, c.errs), hosts...)
	return c
}

// loop starts the candidates' campaign loops.
func (cs cands) loop(t *testing.T) *electortest.Terms {
	t.Helper()
	ids := make([]string, 0, len(cs))
	for id := range cs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var es []elector.Elector
	for _, id := range ids {
		es = append(es, cs[id].e)
	}
	return electortest.CampaignLoop(t, es...)
}

// moveRaftLeader makes member to the raft leader (MoveLeader, asked of the
// current one) and waits until every member follows it.
func (h *clusterHarness) moveRaftLeader(t *testing.T, to int) {
	t.Helper()
	from := h.c.Leader(t)
	if from == to {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := h.c.Status(ctx, to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.c.Client(t, from).MoveLeader(ctx, st.Header.MemberId); err != nil {
		t.Fatalf("move the raft leader from m%d to m%d: %v", from, to, err)
	}
	electortest.Eventually(t, 10*time.Second, fmt.Sprintf("m%d to lead raft", to), func() bool { return h.c.Leader(t) == to })
}

// heal ends member i's partition and waits until it follows the leader.
func (h *clusterHarness) heal(t *testing.T, i int) {
	t.Helper()
	h.c.Heal(i)
	h.c.WaitHealthy(t)
}

// window is the guaranteed part of a lease of ttl (default drift and
// epsilon): how long after a renewal's send time its term holds.
func window(ttl time.Duration) time.Duration { return timingOf(ttl).WithDefaults().Window() }

// heldPast waits up to within for one term to be held that is valid
// past until, and returns it: the term held at a fault, renewed since, or
// a successor's.
func heldPast(t *testing.T, terms *electortest.Terms, until time.Time, within time.Duration) electortest.Span {
	t.Helper()
	var s electortest.Span
	electortest.Eventually(t, within, "one leader valid past "+until.Format("15:04:05.000"), func() bool {
		var ok bool
		s, ok = terms.Leading()
		return ok && s.Term.ValidUntil().After(until)
	})
	return s
}

// raftElected waits until the members other than lost agree on a raft
// leader among them (by Status: WaitHealthy fails while a member is
// partitioned), and returns it and when they did.
func (h *clusterHarness) raftElected(t *testing.T, lost int) (int, time.Time) {
	t.Helper()
	leader := -1
	electortest.Eventually(t, raftElection+slack, fmt.Sprintf("a raft leader without m%d", lost), func() bool {
		ids := map[uint64]int{}
		var lead uint64
		for i := range h.c.Members() {
			if i == lost {
				continue
			}
			st, err := h.c.Status(context.Background(), i)
			if err != nil || st.Leader == 0 || (lead != 0 && st.Leader != lead) {
				return false
			}
			ids[st.Header.MemberId], lead = i, st.Leader
		}
		i, ok := ids[lead]
		leader = i
		return ok
	})
	return leader, time.Now()
}

// renewed waits for term's next acknowledged renewal (its ValidUntil
// moves) and fails the test if the term ends first.
func renewed(t *testing.T, term *elector.Term) {
	t.Helper()
	vu := term.ValidUntil()
	electortest.Eventually(t, 2*faultTTL+slack, "a renewal", func() bool { return term.ValidUntil().After(vu) || term.Err() != nil })
	if err := term.Err(); err != nil {
		t.Fatalf("term (token %d) ended: %v", term.Token, err)
	}
}

// stillLeads fails the test unless s is the one term held now and no
// other term started since s did.
func stillLeads(t *testing.T, terms *electortest.Terms, s electortest.Span, what string) {
	t.Helper()
	if err := s.Term.Err(); err != nil {
		t.Fatalf("%s: %s's term ended: %v", what, s.ID, err)
	}
	if cur, ok := terms.Leading(); !ok || cur.Token != s.Token {
		t.Fatalf("%s: terms held now %v, want only %s", what, terms.Open(), s)
	}
	for _, e := range terms.Ended() {
		if e.Start.After(s.Start) {
			t.Fatalf("%s: a term began while %s led: %s", what, s.ID, e)
		}
	}
}

// lowWater samples how long term is still guaranteed until the returned
// function is called, which gives the least seen (a measurement, not a
// pass/fail figure).
func lowWater(t *testing.T, term *elector.Term) func() time.Duration {
	least := term.Remaining(time.Now())
	stop := sampleWhileHeld(t, term, 10*time.Millisecond, func(now time.Time) { least = min(least, term.Remaining(now)) }, nil)
	return func() time.Duration {
		stop()
		return least
	}
}

// highWater samples term's ValidUntil until the term ends or the returned
// function is called, which gives the latest seen. ValidUntil only moves
// forward while the term lasts; a term that ends early has it clamped to
// that moment, and the latest sample before keeps the deadline it had
// earned, short of a renewal credited in the last 5 ms. A term that
// expired keeps its deadline: the final reading is exact.
func highWater(t *testing.T, term *elector.Term) func() time.Time {
	latest := term.ValidUntil()
	sample := func() {
		if vu := term.ValidUntil(); vu.After(latest) {
			latest = vu
		}
	}
	stop := sampleWhileHeld(t, term, 5*time.Millisecond, func(time.Time) { sample() }, sample)
	return func() time.Time {
		stop()
		return latest
	}
}

// sampleWhileHeld calls sample at every tick of every until term ends or
// the returned function is first called (by the test, or at its cleanup),
// which waits for the sampling to stop and then calls last, if not nil.
func sampleWhileHeld(t *testing.T, term *elector.Term, every time.Duration, sample func(now time.Time), last func()) func() {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-term.Done():
				return
			case now := <-tick.C:
				sample(now)
			}
		}
	}()
	var once sync.Once
	end := func() {
		once.Do(func() {
			close(stop)
			<-done
			if last != nil {
				last()
			}
		})
	}
	t.Cleanup(end)
	return end
}

func elapsed(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// ended checks that the term of lead, which a fault cost its holder, ended
// by its deadline, and describes it and its successor next.
func ended(t *testing.T, spans []electortest.Span, lead, next electortest.Span, at time.Time) string {
	t.Helper()
	old := electortest.SpanOf(t, spans, lead.Token)
	if !errors.Is(old.Err, elector.ErrLeaseExpired) {
		t.Errorf("%s's term ended with %v, want its deadline (%v)", old.ID, old.Err, elector.ErrLeaseExpired)
	}
	return fmt.Sprintf("%s's term ended at %s (valid until %s); %s (token %d → %d) led at %s", old.ID, elapsed(old.End.Sub(at)),
		elapsed(old.ValidUntil.Sub(at)), next.ID, old.Token, next.Token, elapsed(next.Start.Sub(at)))
}
