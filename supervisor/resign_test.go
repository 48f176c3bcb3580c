package supervisor

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// resignTwice asks h's supervisor to resign, waits up to within for the
// log line mark (the first Resign under way), asks again, and runs
// release, which lets the term end; it waits for the term to be given up
// and the first Resign answered with nil, and returns the channel that
// gets the second Resign's answer.
func (h *harness) resignTwice(t *testing.T, buf *syncBuf, mark string, within time.Duration, release func()) <-chan error {
	t.Helper()
	first := make(chan error, 1)
	go func() { first <- h.sup.Resign(context.Background()) }()
	waitLog(t, buf, mark, within)
	second := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	go func() { second <- h.sup.Resign(ctx) }()
	time.Sleep(200 * time.Millisecond) // let it reach the send (bounded; not a sync point for the check)
	release()
	select {
	case <-h.resigns:
	case <-time.After(20 * time.Second):
		t.Fatal("the term was not given up")
	}
	if err := <-first; err != nil {
		t.Fatalf("first resign: %v", err)
	}
	return second
}

// TestResignDuringStopEndsOnlyItsTerm: a second Resign made while the
// first one's stop takes time (the grace period, SIGKILL, the sweep) is
// answered when that term is given up, and never resigns the next term this
// copy wins (it did: the request waited on a channel that only the next
// term's hold read). The child ignores SIGTERM, and the grace runs on the
// fake clock, so the window is held open deterministically.
func TestResignDuringStopEndsOnlyItsTerm(t *testing.T) {
	forModes(t, modes, func(t *testing.T, mode Containment) {
		dir := t.TempDir()
		main := filepath.Join(dir, "main.sh")
		ready := filepath.Join(dir, "ready")
		writeScript(t, main, "#!/bin/sh\ntrap '' TERM\n: > "+ready+"\nwhile :; do sleep 1; done\n")
		log, buf := teeLogger(t)
		h := newHarness(t, func(c *Config) {
			c.Command, c.Containment, c.Logger = []string{main}, mode, log
			c.StopTimeout = 3 * time.Second
		})
		h.grant(120)
		waitFor(t, "the child", func() bool { return h.sup.Child() != nil })
		waitFor(t, "the child's trap", func() bool { _, err := os.Stat(ready); return err == nil })
		second := h.resignTwice(t, buf, "msg=stopping", 10*time.Second, func() {
			h.clk.Advance(4 * time.Second) // the grace ends: SIGKILL
		})
		blocked := false
		select {
		case err := <-second:
			t.Logf("second Resign answered when term 120 ended: %v", err)
			return
		case <-time.After(2 * time.Second):
			blocked = true
			t.Errorf("a Resign made during the stop grace was still blocked 2 s after term 120 was given up")
		}
		// This copy wins term 121 after its cool-down.
		h.grantAfterCoolDown(t, 121)
		var err error
		waitUntil(t, 20*time.Second, func() bool {
			select {
			case err = <-second:
				return true
			default:
			}
			h.clk.Advance(time.Second)        // through the next stop's grace, if any
			time.Sleep(10 * time.Millisecond) // polling with a deadline
			return false
		}, "the second Resign answered")
		{
			if blocked && h.ev.count("lost:resigned") >= 2 {
				t.Fatalf("a Resign asked during term 120's stop resigned term 121 (err %v); events %v", err, h.ev.events)
			}
		}
	})
}
