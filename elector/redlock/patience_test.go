package redlock

import (
	"testing"
	"time"

	"github.com/electd/electd/elector/internal/redistest"
)

// TestSlowServersAfterReconnect: every server answers in 280 ms, within
// the request timeout (400 ms at TTL 2 s) on an open connection but not
// the two round trips a new one needs (HELLO, then the script). Once every
// connection is reset, a fixed timeout never gets a reply again from any
// server. With patience each server's retry waits longer and gets its
// reply: the leader renews again (or, had its lease lapsed, wins again).
func TestSlowServersAfterReconnect(t *testing.T) {
	h := newHarness(t, 3)
	a, ps := h.proxied(t, faultElection(t), "a")
	redistest.SlowAfterReconnect(t, redistest.Slow{Candidate: a, Proxies: ps,
		TTL: faultTTL, Delay: 140 * time.Millisecond, AfterReset: 15 * time.Second})
}
