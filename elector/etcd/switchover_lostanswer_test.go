package etcd

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/testenv"
)

// TestSwitchoverAnswerLost: the leader's switchover transaction commits on
// the store, but its answer is lost (the connection drops after the
// request went out). The named successor c leads with a greater token, as
// asked; ResignTo must then not report that the term went elsewhere. From
// the adversarial review of 9c934b3: stepAside returns the store error
// without looking whether the hand-over landed, handTo revokes and returns
// it, and the supervisor logs "switchover did not hand the term to the
// named candidate; it went to the next in line" (electd switchover exits
// non-zero) while c leads.
func TestSwitchoverAnswerLost(t *testing.T) {
	srv := testenv.StartEtcd(t)
	const election = "answer-lost"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var lose atomic.Bool
	var lost atomic.Int32
	acli := switchoverWatchedClient(t, srv.Endpoint(), func(send func() error) error {
		err := send()
		if err == nil && lose.Load() {
			lost.Add(1)
			return status.Error(codes.Unavailable, "answer lost (test)")
		}
		return err
	})

	const ttl = 6 * time.Second
	_, ra, cb, cc := queueOfThree(t, ctx, srv, acli, election, ttl, "c")

	lose.Store(true)
	rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
	defer rcancel()
	rerr := ra.Term.ResignTo(rctx, "c")
	rc := electortest.MustLead(t, cc, ttl/3, "c")
	electortest.StillWaiting(t, cb, "b")
	if rc.Term.Token <= ra.Term.Token {
		t.Fatalf("c's token %d after a's %d", rc.Term.Token, ra.Term.Token)
	}
	if lost.Load() == 0 {
		t.Fatalf("the switchover's transaction was not seen")
	}
	if rerr != nil {
		t.Fatalf("c leads (token %d) as the switchover asked, yet ResignTo reported: %v", rc.Term.Token, rerr)
	}
}
