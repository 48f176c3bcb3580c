package redis

import (
	"testing"

	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/testenv"
)

func TestLockSuite(t *testing.T) {
	srv := testenv.StartRedis(t)
	electortest.RunLock(t, &harness{srv: srv, cli: newClient(t, srv.Addr())})
}
