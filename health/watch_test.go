package health

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/electd/electd/elector"
)

// startHTTPTest serves s.Handler on loopback until the test ends. Cleanups
// run last-in first-out, so streams opened later are closed before it.
func startHTTPTest(t *testing.T, s *Server) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv
}

// openWatch connects to /leader/watch at base. The request ends with the
// test (or after a minute, so a broken stream fails instead of hanging).
func openWatch(t *testing.T, base string) (*http.Response, *sseReader) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/leader/watch", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp, &sseReader{r: bufio.NewReader(resp.Body)}
}

// nextLeader reads the next "leader" event and decodes its data.
func nextLeader(t *testing.T, sr *sseReader) leaderDoc {
	t.Helper()
	ev, err := sr.nextEvent()
	if err != nil {
		t.Fatalf("read event: %v", err)
	}
	if ev.Event != "leader" {
		t.Fatalf("event = %q, want leader", ev.Event)
	}
	var d leaderDoc
	if err := json.Unmarshal([]byte(ev.Data), &d); err != nil {
		t.Fatalf("event data %q: %v", ev.Data, err)
	}
	return d
}

func docID(d leaderDoc) string {
	if d.Leader == nil {
		return "<none>"
	}
	return d.Leader.ID
}

func TestWatchDeliversChangesInOrder(t *testing.T) {
	tests := []struct {
		name    string
		initial *elector.Leader // fed before connecting
		changes []elector.Leader
		want    []string // leader ids of the events, in order
	}{
		{name: "unknown at connect", changes: []elector.Leader{leader("a", 1)}, want: []string{"<none>", "a"}},
		{name: "known at connect", initial: ptr(leader("a", 1)), changes: []elector.Leader{leader("b", 2), {}, leader("c", 3)},
			want: []string{"a", "b", "<none>", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, o := newTestServer(t, nil)
			srv := startHTTPTest(t, s)
			if tt.initial != nil {
				o.feed(t, *tt.initial)
			}
			resp, sr := openWatch(t, srv.URL)
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			var got []string
			d := nextLeader(t, sr)
			if d.Election != "e" || d.Self.ID != "self" {
				t.Errorf("event = %+v, want election e and self id self", d)
			}
			got = append(got, docID(d))
			for _, l := range tt.changes {
				o.feed(t, l)
				d := nextLeader(t, sr)
				got = append(got, docID(d))
				if d.Leader != nil && (d.Leader.FencingToken != l.Token || d.Leader.Since != l.Since.UTC().Format(time.RFC3339Nano)) {
					t.Errorf("event leader = %+v, want token %d since %v", d.Leader, l.Token, l.Since)
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("events %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("events %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestWatchFastChangesNeverGoBack(t *testing.T) {
	s, o := newTestServer(t, nil)
	srv := startHTTPTest(t, s)
	o.feed(t, leader("n", 1))
	_, sr := openWatch(t, srv.URL)
	if d := nextLeader(t, sr); d.Leader == nil || d.Leader.FencingToken != 1 {
		t.Fatalf("first event = %+v, want token 1", d.Leader)
	}
	const last = 200
	for tok := uint64(2); tok <= last; tok++ {
		o.feed(t, leader("n", tok))
	}
	prev := uint64(1)
	for prev != last {
		d := nextLeader(t, sr)
		if d.Leader == nil || d.Leader.FencingToken <= prev {
			t.Fatalf("event %+v after token %d: out of order", d.Leader, prev)
		}
		prev = d.Leader.FencingToken
	}
}

func TestWatchHeartbeat(t *testing.T) {
	s, _ := newTestServer(t, nil)
	s.heartbeat = 5 * time.Millisecond
	srv := startHTTPTest(t, s)
	_, sr := openWatch(t, srv.URL)
	nextLeader(t, sr)
	ev, err := sr.next()
	if err != nil {
		t.Fatal(err)
	}
	if ev.Comment != "heartbeat" || ev.Event != "" {
		t.Errorf("got %+v, want a heartbeat comment", ev)
	}
}

func TestWatchStreamLimit(t *testing.T) {
	s, _ := newTestServer(t, nil)
	s.streams = newStreamSet(1, 1)
	srv := startHTTPTest(t, s)
	_, sr := openWatch(t, srv.URL)
	nextLeader(t, sr) // the first stream holds the only slot
	resp, err := http.Get(srv.URL + "/leader/watch")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("second stream: code %d, want 503", resp.StatusCode)
	}
}

// serve runs s.Serve on a loopback listener; stop cancels it and returns
// Serve's result.
func serve(t *testing.T, s *Server) (base string, stop func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	var once bool
	var res error
	stop = func() error {
		if !once {
			once = true
			cancel()
			res = <-done
		}
		return res
	}
	t.Cleanup(func() { stop() })
	return "http://" + ln.Addr().String(), stop
}

func TestWatchOutlivesServerTimeouts(t *testing.T) {
	s, o := newTestServer(t, nil)
	s.readTimeout = 50 * time.Millisecond
	s.writeTimeout = 50 * time.Millisecond
	s.heartbeat = 5 * time.Millisecond
	base, _ := serve(t, s)
	o.feed(t, leader("a", 1))
	_, sr := openWatch(t, base)
	nextLeader(t, sr)
	// Read heartbeats for several times both timeouts: the stream must
	// stay open, and still deliver changes afterwards.
	start := time.Now()
	for time.Since(start) < 300*time.Millisecond {
		if _, err := sr.next(); err != nil {
			t.Fatalf("stream ended after %v: %v", time.Since(start), err)
		}
	}
	o.feed(t, leader("b", 2))
	if d := nextLeader(t, sr); docID(d) != "b" {
		t.Errorf("event after timeouts = %s, want b", docID(d))
	}
}

func TestServeShutsDownOnCancel(t *testing.T) {
	s, o := newTestServer(t, nil)
	base, stop := serve(t, s)
	o.feed(t, leader("a", 1))

	resp, err := http.Get(base + "/livez")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/livez = %d", resp.StatusCode)
	}
	_, sr := openWatch(t, base)
	nextLeader(t, sr)

	if err := stop(); err != nil {
		t.Fatalf("Serve = %v, want nil after cancel", err)
	}
	// The open stream was ended, not cut off by the shutdown timeout.
	for {
		_, err := sr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("stream ended with %v, want EOF", err)
		}
	}
	if _, err := http.Get(base + "/livez"); err == nil {
		t.Error("server still answers after Serve returned")
	}
}

func TestServeListenerFailure(t *testing.T) {
	s, _ := newTestServer(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if err := s.Serve(context.Background(), ln); err == nil {
		t.Error("Serve on a closed listener = nil, want an error")
	}
}
