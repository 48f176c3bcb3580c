package redlock

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/elector/backend"
	"github.com/electd/electd/elector/electortest"
)

// TestMembers: /healthz's store_members for a quorum names every server,
// in the URL's order, whether it answers, and the quorum.
func TestMembers(t *testing.T) {
	h := newHarness(t, 3)
	c := electortest.Open(t, Backend, "redlock://"+strings.Join(h.addrs(), ","))
	report := c.(interface {
		Members(context.Context) ([]backend.Member, error)
	})
	check := func(answers ...bool) bool {
		ms, err := report.Members(context.Background())
		if err != nil || len(ms) != 3 {
			t.Fatalf("Members: %v, %v", ms, err)
		}
		for i, m := range ms {
			if m.Endpoint != h.addrs()[i] || m.Quorum != 2 || !m.InUse || m.Answers != answers[i] || (m.Error == "") != answers[i] {
				return false
			}
		}
		return true
	}
	if !check(true, true, true) {
		t.Fatal("three servers up: not all answer")
	}
	h.srvs[1].Kill(t)
	electortest.Eventually(t, 5*time.Second, "the killed server reported down", func() bool { return check(true, false, true) })
	h.srvs[1].Start(t)
	electortest.Eventually(t, 5*time.Second, "the server reported up again", func() bool { return check(true, true, true) })
}
