package redis

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/electd/electd/elector/electortest"
)

// TestTokensSurviveALaggingClock: tokens were issued by a server whose clock
// ran an hour ahead (the token key says so); Redis restarts empty on a
// server whose clock is behind the last token. The next term's token is
// still above every earlier one, because the candidates carry the highest
// token they saw into their next step.
func TestTokensSurviveALaggingClock(t *testing.T) {
	srv, cli := startRedis(t)
	ctx := context.Background()
	ahead := uint64(time.Now().Add(time.Hour).UnixMicro())
	if err := cli.Set(ctx, keysFor("lag").token, fmt.Sprint(ahead), 0).Err(); err != nil {
		t.Fatal(err)
	}
	a, b := newElector(t, srv.Addr(), "lag", "a"), newElector(t, srv.Addr(), "lag", "b")
	ra := electortest.MustLead(t, electortest.Campaign(ctx, a), 5*testTTL, "a")
	if ra.Term.Leader.Token <= ahead {
		t.Fatalf("first token %d, want above the stored %d", ra.Term.Leader.Token, ahead)
	}
	cb := electortest.Campaign(ctx, b)
	waitQueued(t, cli, "lag", 2)
	last := ra.Term.Leader.Token
	electortest.Eventually(t, testTTL, "b to see a's token", func() bool { return b.core.Seen() >= last })

	srv.Kill(t)
	srv.Start(t) // empty: the token key is gone, and TIME is an hour behind it
	<-ra.Term.Done()
	rb := electortest.MustLead(t, cb, 5*testTTL, "b")
	if got := rb.Term.Leader.Token; got <= last {
		t.Fatalf("token after the restart = %d, want above %d (the server's clock gave %d)", got, last, time.Now().UnixMicro())
	}
	t.Logf("tokens %d → %d across a restart onto a clock %s behind", last, rb.Term.Leader.Token, time.Hour)
	electortest.Resign(t, rb.Term)
}
