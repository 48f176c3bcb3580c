package zk_test

import (
	"context"
	"errors"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/backend"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/elector/zk"
	"github.com/electd/electd/internal/testenv"
)

// TestZKDigestAuthAndChroot: with user:pass in the URL, electd
// authenticates (digest) and its nodes, below the URL's chroot, carry the
// creator-only ACL: a client without the credentials cannot read them, and
// one with a wrong password is refused for good (a permission refusal).
func TestZKDigestAuthAndChroot(t *testing.T) {
	srv := testenv.StartZK(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cand := elector.Candidate{Election: "auth", ID: "a", Timing: elector.Timing{TTL: 2 * time.Second}}
	a := electortest.DialURL(t, zk.Backend, "zk://alice:s3cret@"+srv.Addr()+"/apps/one", cand)
	term, err := a.Campaign(ctx)
	if err != nil {
		t.Fatalf("campaign with digest credentials: %v", err)
	}
	l, err := a.Leader(ctx)
	if err != nil || l.ID != "a" || l.Token != term.Token {
		t.Fatalf("Leader = %+v, %v", l, err)
	}

	anon := client(t, []string{srv.Addr()})
	if _, _, err := anon.Children("/apps/one/electd/elections/auth"); !errors.Is(err, gozk.ErrNoAuth) {
		t.Fatalf("a client without credentials listed the election: %v, want ErrNoAuth", err)
	}
	if ok, _, err := anon.Exists("/electd"); err != nil || ok {
		t.Fatalf("/electd outside the chroot: exists %t, %v; want nothing there", ok, err)
	}

	cand.ID = "b"
	b := electortest.DialURL(t, zk.Backend, "zk://alice:wrong@"+srv.Addr()+"/apps/one", cand)
	_, err = b.Campaign(ctx)
	var se *elector.StoreError
	if !errors.As(err, &se) || !se.Permanent || zk.Backend.Refused(err) != backend.RefusedPermission {
		t.Fatalf("campaign with a wrong password: %v; want a permanent permission refusal", err)
	}
	t.Logf("wrong password: %v", err)
	electortest.Resign(t, term)
}
