package etcd_test

import (
	"testing"

	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/testenv"
)

func TestLockSuite(t *testing.T) {
	electortest.RunLock(t, &harness{srv: testenv.StartEtcd(t)})
}
