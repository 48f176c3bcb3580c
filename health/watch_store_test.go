package health

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/internal/testenv"
	"github.com/electd/electd/store"
)

// TestWatchShowsEachTermOnce: /leader/watch, fed by a real store, shows a
// new term once, with the since it was first shown with. (etcd's
// observers see the new leader's key before the leader has written its
// start time into it: the term came twice, with two since values.)
func TestWatchShowsEachTermOnce(t *testing.T) {
	tests := []struct {
		name string
		url  func(t *testing.T) string
	}{
		{name: "etcd", url: func(t *testing.T) string { return "etcd://" + testenv.StartEtcd(t).Endpoint() }},
		{name: "redis", url: func(t *testing.T) string { return "redis://" + testenv.StartRedis(t).Addr() }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			st, err := store.Open(ctx, store.Options{URL: tc.url(t)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			timing := elector.Timing{TTL: 2 * time.Second}
			newElector := func(id string) elector.Locker {
				el, err := st.NewElector(elector.Candidate{Election: "once", ID: id, Timing: timing})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = el.Close() })
				return el
			}
			v := NewView("once", newElector("observer"), nil)
			runView(t, v)
			s, err := NewServer(Config{Election: "once", View: v})
			if err != nil {
				t.Fatal(err)
			}
			srv := startHTTPTest(t, s)
			_, sr := openWatch(t, srv.URL)
			events := make(chan leaderDoc, 16)
			go func() {
				for {
					ev, err := sr.nextEvent()
					if err != nil {
						close(events)
						return
					}
					var d leaderDoc
					if ev.Event == "leader" && json.Unmarshal([]byte(ev.Data), &d) == nil {
						events <- d
					}
				}
			}()

			// Two terms, one after the other: a leads, resigns, b leads.
			var got []leaderDoc
			for _, id := range []string{"a", "b"} {
				term, err := newElector(id).Campaign(ctx)
				if err != nil {
					t.Fatal(err)
				}
				// Long enough for the leader's own since to reach observers.
				got = append(got, collect(events, time.Second)...)
				if err := term.Resign(ctx); err != nil {
					t.Fatal(err)
				}
			}
			got = append(got, collect(events, time.Second)...)
			seen := map[uint64]string{}
			var terms []string
			for _, d := range got {
				if d.Leader == nil {
					continue
				}
				terms = append(terms, d.Leader.ID)
				if since, ok := seen[d.Leader.FencingToken]; ok {
					t.Fatalf("term %s (token %d) shown twice, since %s then %s; events: %+v",
						d.Leader.ID, d.Leader.FencingToken, since, d.Leader.Since, got)
				}
				seen[d.Leader.FencingToken] = d.Leader.Since
			}
			if len(terms) != 2 || terms[0] != "a" || terms[1] != "b" {
				t.Fatalf("terms shown %q, want [a b]", terms)
			}
		})
	}
}

// collect gathers what ch delivers within d.
func collect(ch <-chan leaderDoc, d time.Duration) []leaderDoc {
	var out []leaderDoc
	end := time.After(d)
	for {
		select {
		case doc, ok := <-ch:
			if !ok {
				return out
			}
			out = append(out, doc)
		case <-end:
			return out
		}
	}
}
