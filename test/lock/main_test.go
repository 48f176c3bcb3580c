package lock

import (
	"testing"

	"github.com/electd/electd/test/kit"
)

// bin holds electd and the recorder, built by TestMain.
var bin kit.Binaries

func TestMain(m *testing.M) { kit.Main(m, "lock", "E2E", &bin) }

// scenarios run, one after another, against each backend's one server;
// each has its own lock name and record log.
var scenarios = []struct {
	name string
	run  func(t *testing.T, s *kit.Store)
}{
	{"MutualExclusion", testMutualExclusion},
	{"Handover", testHandover},
	{"Busy", testBusy},
	{"SignalsLeaveNothing", testSignals},
	{"ExitCodes", testExitCodes},
	{"LostLockStopsCommand", testLostLock},
	{"Slots", testSlots},
	{"SlotsMismatch", testSlotsMismatch},
	{"OncePer", testOncePer},
	{"OncePerFailedRunRetries", testOncePerRetry},
	{"LeaderWatch", testLeaderWatch},
	{"TreeMainKilled", testTreeMainKilled},
	{"ContainmentRefused", testContainmentRefused},
}

// TestBackends runs every scenario against a real etcd and a real Redis;
// the two backends run in parallel, each on its own server.
func TestBackends(t *testing.T) {
	kit.Run(t, kit.Selected(t, "LOCK_BACKENDS"), func(t *testing.T, s *kit.Store) {
		for _, sc := range scenarios {
			t.Run(sc.name, func(t *testing.T) { sc.run(t, s) })
		}
	})
}
