package etcd

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/testenv"
)

// TestConfirmNeedsTheSameTerm: a renewal's proof (renewal.go) holds only
// for the member and raft term that answered before the renewal was sent,
// and never for term 0 (a member that just restarted reports 0 until it
// applies an entry). Read against a real etcd: the member's own mark, the
// term before it, the next one, 0, and another member's id.
func TestConfirmNeedsTheSameTerm(t *testing.T) {
	srv := testenv.StartEtcd(t)
	cli := srv.Client(t)
	ps := newPins(cli)
	t.Cleanup(func() {
		if err := ps.close(); err != nil {
			t.Error(err)
		}
	})
	p, err := ps.at(0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	before, err := p.markBefore(ctx, "/electd/test")
	if err != nil || before.term == 0 || before.member == 0 {
		t.Fatalf("mark before: %+v, %v; want the member's id and raft term", before, err)
	}
	term := before.term
	for _, tc := range []struct {
		name   string
		before mark
		want   error
	}{
		{"the same member and term", before, nil},
		{"an earlier term", mark{before.member, term - 1}, errUnproved},
		{"a later term", mark{before.member, term + 1}, errUnproved},
		{"no term", mark{before.member, 0}, errUnproved},
		{"another member", mark{before.member + 1, term}, errUnproved},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := p.confirm(ctx, "/electd/test", tc.before); !errors.Is(err, tc.want) {
				t.Fatalf("confirm with %+v (member's %+v) = %v, want %v", tc.before, before, err, tc.want)
			}
			// The entry: its term is the read's here (one member, one
			// raft term), and it writes nothing.
			kvs, err := p.confirmByEntry(ctx, "/electd/test", tc.before)
			if !errors.Is(err, tc.want) || len(kvs) != 0 {
				t.Fatalf("confirm by entry with %+v (member's %+v) = %d keys, %v; want none, %v", tc.before, before, len(kvs), err, tc.want)
			}
		})
	}
	lease, err := cli.Grant(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := keepAliveOnce(ctx, p, lease.ID); err != nil || got != before {
		t.Fatalf("keep alive: %+v, %v; want no error and the mark %+v", got, err, before)
	}
	if _, err := cli.Revoke(ctx, lease.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := keepAliveOnce(ctx, p, lease.ID); !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		t.Fatalf("keep alive of a revoked lease = %v, want lease not found", err)
	}
}

// TestPinnedRenewalRefusedAtOnce: a renewal sent through a member cut off
// from its peers, once it knows it has no leader, is refused at once on
// electd's own connection to it (which carries the client's dial options,
// require-leader among them: without it the member holds the request until
// its timeout), so the renewal loop asks the next member at once instead
// of waiting out the attempt.
func TestPinnedRenewalRefusedAtOnce(t *testing.T) {
	c := testenv.StartEtcdCluster(t)
	cli := dialCluster(t, c)
	ps := newPins(cli)
	t.Cleanup(func() { _ = ps.close() })

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lease, err := cli.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	cut := partitionFollower(t, c)
	p, err := ps.at(cut)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		start := time.Now()
		_, err := keepAliveOnce(rctx, p, clientv3.LeaseID(lease.ID))
		took := time.Since(start)
		rcancel()
		if !refusedAtOnce(err) || took > 2*time.Second {
			t.Fatalf("renewal %d through the partitioned member: %v after %s, want a refusal for want of a leader at once", i, err, took)
		}
	}
}

// TestKeptStreamRenewsAfterRestart: the renewals' stream is kept from one
// renewal to the next (keeper); when it ended meanwhile (here, the member
// restarted), the next renewal goes out on a new stream at once instead of
// failing once and waiting for a retry.
func TestKeptStreamRenewsAfterRestart(t *testing.T) {
	srv := testenv.StartEtcd(t)
	cli := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lease, err := cli.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	p := firstPin(t, cli)
	k := keeper{parent: ctx}
	defer k.close()
	if _, err := k.keepAlive(ctx, p, clientv3.LeaseID(lease.ID)); err != nil {
		t.Fatalf("first renewal: %v", err)
	}
	kept := k.stream
	srv.Restart(t)
	electortest.Eventually(t, 10*time.Second, "the member to answer again", func() bool {
		rctx, rcancel := context.WithTimeout(ctx, time.Second)
		defer rcancel()
		_, err := p.get(rctx, "/electd/test", false)
		return err == nil
	})
	rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
	defer rcancel()
	if _, err := k.keepAlive(rctx, p, clientv3.LeaseID(lease.ID)); err != nil {
		t.Fatalf("renewal after the restart: %v; want it renewed on a new stream", err)
	}
	if k.stream == kept {
		t.Fatal("the renewal after the restart went on the stream kept from before it")
	}
}

// firstPin is the pin of cli's first member; cli's pins are closed when
// the test ends.
func firstPin(t *testing.T, cli *clientv3.Client) *pin {
	t.Helper()
	ps := newPins(cli)
	t.Cleanup(func() { _ = ps.close() })
	p, err := ps.at(0)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// keepAliveOnce sends one renewal of lease through p on a stream of its
// own, closed after its answer.
func keepAliveOnce(ctx context.Context, p *pin, lease clientv3.LeaseID) (mark, error) {
	k := keeper{parent: ctx}
	defer k.close()
	return k.keepAlive(ctx, p, lease)
}
