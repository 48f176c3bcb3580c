package etcd_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/elector/etcd"
	"github.com/electd/electd/internal/testenv"
)

type harness struct {
	srv *testenv.Etcd
}

func (h *harness) Addr() string         { return h.srv.Endpoint() }
func (h *harness) Restart(t testing.TB) { h.srv.Restart(t) }
func (h *harness) New(t testing.TB, c electortest.Candidate) elector.Locker {
	t.Helper()
	return electortest.Dial(t, etcd.Backend, c)
}

func (h *harness) Queued(t testing.TB, election string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := h.srv.Client(t).Get(ctx, etcd.DefaultPrefix+election+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatalf("count candidates: %v", err)
	}
	return int(resp.Count)
}

func TestConformance(t *testing.T) {
	electortest.Run(t, &harness{srv: testenv.StartEtcd(t)})
}
