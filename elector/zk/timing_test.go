package zk_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/faultproxy"
	"github.com/electd/electd/internal/testenv"
)

// TestZKNegotiatedTimeout: the server (tickTime 200ms) clamps a session
// timeout to 400ms..4s; the term's deadlines run on what it negotiated,
// the difference is logged, and a negotiated timeout that leaves no valid
// renewal interval is refused.
func TestZKNegotiatedTimeout(t *testing.T) {
	h := &harness{single: testenv.StartZK(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tc := range []struct {
		ask, want time.Duration
	}{
		{10 * time.Second, 4 * time.Second},              // clamped down to 20 ticks
		{150 * time.Millisecond, 400 * time.Millisecond}, // clamped up to 2 ticks
		{2 * time.Second, 2 * time.Second},
	} {
		logs, log := electortest.NewLogs()
		e := h.New(t, electortest.Candidate{StoreAddr: h.Addr(), Candidate: elector.Candidate{
			Election: "negotiate-" + tc.ask.String(), ID: "a", Timing: elector.Timing{TTL: tc.ask}, Logger: log}})
		term, err := e.Campaign(ctx)
		if err != nil {
			t.Fatalf("ttl %s: campaign: %v", tc.ask, err)
		}
		got := term.Timing()
		t.Logf("ttl asked %s: negotiated %s, renew every %s, window %s", tc.ask, got.TTL, got.RenewInterval, got.Window())
		if got.TTL != tc.want || got.RenewInterval != tc.want/5 {
			t.Errorf("ttl asked %s: the term runs on %s, want the negotiated %s (renewals every %s)", tc.ask, got, tc.want, tc.want/5)
		}
		// The tick is 200ms: a renewal's evidence is 3/4 of it and 20ms older than its Sync.
		if got.Lag != 170*time.Millisecond {
			t.Errorf("ttl asked %s: the term's timing has lag %s, want 170ms", tc.ask, got.Lag)
		}
		if v := term.ValidUntil(); v.After(time.Now().Add(got.Window())) {
			t.Errorf("ttl asked %s: ValidUntil %s from now, beyond the negotiated window %s", tc.ask, time.Until(v), got.Window())
		}
		warned := len(logs.Lines(electortest.Line(slog.LevelWarn, "the zookeeper ensemble negotiated another session timeout than --ttl: deadlines run on the negotiated one", "negotiated", tc.want.String())))
		if (tc.ask != tc.want) != (warned > 0) {
			t.Errorf("ttl asked %s, negotiated %s: %d warnings", tc.ask, tc.want, warned)
		}
		electortest.Resign(t, term)
	}

	// Epsilon 3s fits a 10s TTL, not the 4s the server grants.
	e := h.New(t, electortest.Candidate{StoreAddr: h.Addr(), Candidate: elector.Candidate{
		Election: "negotiate-refused", ID: "a", Timing: elector.Timing{TTL: 10 * time.Second, Epsilon: 3 * time.Second}}})
	_, err := e.Campaign(ctx)
	var ce *elector.ConfigError
	if !errors.As(err, &ce) || ce.Field != "ttl" {
		t.Fatalf("campaign on a negotiated timeout that leaves no renewal interval: %v, want a ConfigError naming ttl", err)
	}
	t.Logf("refused: %v", err)
	if n := h.Queued(t, "negotiate-refused"); n != 0 {
		t.Fatalf("the refused campaign left %d nodes", n)
	}

	// Renewals every 60ms for a 150ms TTL become every 160ms of the 400ms
	// granted: two of them (320ms) fit its window (386ms), not with the
	// renewal's lag (170ms) too.
	e = h.New(t, electortest.Candidate{StoreAddr: h.Addr(), Candidate: elector.Candidate{
		Election: "negotiate-lag", ID: "a", Timing: elector.Timing{TTL: 150 * time.Millisecond, RenewInterval: 60 * time.Millisecond}}})
	_, err = e.Campaign(ctx)
	if !errors.As(err, &ce) || ce.Field != "ttl" || !strings.Contains(err.Error(), "renewal lag 170ms") {
		t.Fatalf("campaign on a negotiated timeout whose renewal lag leaves no room for a missed renewal: %v, want a ConfigError naming ttl and the lag", err)
	}
	t.Logf("refused: %v", err)
}

// acks records each renewal that counted: when it was acknowledged, and
// how long after its send.
type acks struct {
	elector.NopInstrument
	mu  sync.Mutex
	got []ack
}

type ack struct {
	at, sent time.Time
}

func (a *acks) Renewed(took time.Duration) {
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.got = append(a.got, ack{at: now, sent: now.Add(-took)})
}

func (a *acks) last() (ack, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.got) == 0 {
		return ack{}, 0
	}
	return a.got[len(a.got)-1], len(a.got)
}

// TestZKDeadlineFromSendTime: behind a link that delays every packet by
// 150ms each way, each renewal is acknowledged about 300ms after it was
// sent, and ValidUntil is the SEND time plus the window, not the time of
// the answer. (A renewal there costs lag and three round trips, 1.07s:
// ttl 4s, so that a renewal fits twice in the window.)
func TestZKDeadlineFromSendTime(t *testing.T) {
	const delay = 150 * time.Millisecond
	srv := testenv.StartZK(t)
	h := &harness{single: srv}
	p := faultproxy.Start(t, srv.Addr())
	p.SetDelay(delay)
	in := &acks{}
	e := h.New(t, electortest.Candidate{StoreAddr: p.Addr(), Candidate: elector.Candidate{
		Election: "sendtime", ID: "a", Timing: elector.Timing{TTL: 4 * time.Second}, Instrument: in}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	term, err := e.Campaign(ctx)
	if err != nil {
		t.Fatalf("campaign: %v", err)
	}
	w := term.Timing().Window()
	_, n0 := in.last()
	electortest.Eventually(t, 10*time.Second, "three renewals", func() bool {
		_, n := in.last()
		return n >= n0+3
	})
	// Read the deadline and the last ack together: no renewal in between.
	var a ack
	var v time.Time
	electortest.Eventually(t, 5*time.Second, "a quiet reading", func() bool {
		a1, n1 := in.last()
		v = term.ValidUntil()
		a, _ = in.last()
		_, n2 := in.last()
		return n1 == n2 && a == a1
	})
	took := a.at.Sub(a.sent)
	t.Logf("renewal sent, acknowledged %s later; ValidUntil = send + %s (window %s), = ack + %s",
		took.Round(time.Millisecond), v.Sub(a.sent).Round(time.Millisecond), w, v.Sub(a.at).Round(time.Millisecond))
	if took < 2*delay {
		t.Fatalf("a renewal through a %s-each-way link was acknowledged %s after its send", delay, took)
	}
	if d := v.Sub(a.sent.Add(w)); d < -5*time.Millisecond || d > 5*time.Millisecond {
		t.Fatalf("ValidUntil is send time + window %+v; want it exact (send %s, ack %s later)", d, a.sent.Format("15:04:05.000"), took)
	}
	if !v.Before(a.at.Add(w - 2*delay + 5*time.Millisecond)) {
		t.Fatalf("ValidUntil %s after the ack: the deadline counts from the answer, not the send", v.Sub(a.at))
	}
	electortest.Resign(t, term)
}
