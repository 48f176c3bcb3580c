package etcd_test

import (
	"context"
	"testing"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/elector/etcd"
	"github.com/electd/electd/internal/testenv"
)

// TestRenewalsLogInOnce: with etcd's auth on, a leader's renewals cost no
// login. clientv3 logs in again before it opens any gRPC stream (a bcrypt
// check and a raft write on the server), so a keepalive stream per renewal
// was a login per renewal; renewals now share one stream. Counted on the
// server: over at least 20 renewals, at most one login and one keepalive
// stream, counted from the second renewal on.
func TestRenewalsLogInOnce(t *testing.T) {
	srv := testenv.StartEtcd(t)
	srv.EnableAuth(t, "root-renewals")
	srv.AddUser(t, "electd", "pw-renewals", "/electd/")
	url := "etcd://electd:pw-renewals@" + srv.Endpoint()
	e := electortest.DialURL(t, etcd.Backend, url, elector.Candidate{
		Election: "renewals", ID: "a",
		Timing: elector.Timing{TTL: 2 * time.Second, RenewInterval: 50 * time.Millisecond},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	term, err := e.Campaign(ctx)
	if err != nil {
		t.Fatalf("campaign: %v", err)
	}
	const renewals = 20
	// Count from the second renewal on: by then the renewals' stream and
	// the leader's watch of its own key (each a login) are open.
	first := srv.GRPCCount(t, "grpc_server_msg_received_total", "LeaseKeepAlive")
	electortest.Eventually(t, 20*time.Second, "two renewals", func() bool {
		return srv.GRPCCount(t, "grpc_server_msg_received_total", "LeaseKeepAlive")-first >= 2
	})
	logins := srv.GRPCCount(t, "grpc_server_started_total", "Authenticate")
	streams := srv.GRPCCount(t, "grpc_server_started_total", "LeaseKeepAlive")
	sent := srv.GRPCCount(t, "grpc_server_msg_received_total", "LeaseKeepAlive")
	electortest.Eventually(t, 20*time.Second, "20 keepalive messages to reach the server", func() bool {
		return srv.GRPCCount(t, "grpc_server_msg_received_total", "LeaseKeepAlive")-sent >= renewals
	})
	select {
	case <-term.Done():
		t.Fatalf("the term ended: %v", term.Err())
	default:
	}
	gotLogins := srv.GRPCCount(t, "grpc_server_started_total", "Authenticate") - logins
	gotStreams := srv.GRPCCount(t, "grpc_server_started_total", "LeaseKeepAlive") - streams
	t.Logf("over %d+ keepalive messages: %d logins, %d keepalive streams", renewals, gotLogins, gotStreams)
	if gotLogins > 1 || gotStreams > 1 {
		t.Fatalf("over %d+ keepalive messages the server saw %d logins and %d keepalive streams; want at most 1 of each", renewals, gotLogins, gotStreams)
	}
}
