package redis

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/testenv"
)

// harness runs the backend-neutral conformance suite against a real
// redis-server (restarted empty by Restart).
type harness struct {
	srv *testenv.Redis
	cli redis.UniversalClient // for Queued
}

func (h *harness) New(t testing.TB, c electortest.Candidate) elector.Locker {
	t.Helper()
	return electortest.Dial(t, Backend, c)
}

func (h *harness) Addr() string { return h.srv.Addr() }

func (h *harness) Restart(t testing.TB) { t.Helper(); h.srv.Restart(t) }

func (h *harness) Queued(t testing.TB, election string) int {
	t.Helper()
	return queued(t, h.cli, election)
}

func TestConformance(t *testing.T) {
	srv := testenv.StartRedis(t)
	electortest.Run(t, &harness{srv: srv, cli: newClient(t, srv.Addr())})
}
