package e2e

import (
	"testing"

	"github.com/electd/electd/test/kit"
)

// bin holds electd and the recorder, built by TestMain.
var bin kit.Binaries

func TestMain(m *testing.M) { kit.Main(m, "e2e", "E2E", &bin) }

// scenarios run, one after another, against each backend's one server;
// each has its own election and record log.
var scenarios = []struct {
	name string
	run  func(t *testing.T, s *kit.Store)
}{
	{"ThreeCopies", testThreeCopies},
	{"SIGTERMLeader", testSIGTERMLeader},
	{"Kill9Leader", testKill9Leader},
	{"CutOffLeader", testCutOffLeader},
	{"ResignEndpoint", testResignEndpoint},
	{"Switchover", testSwitchover},
	{"OnExit", testOnExit},
	{"StopTimeout", testStopTimeout},
	{"Grandchildren", testGrandchildren},
	{"Environment", testEnvironment},
	{"LeaderSince", testLeaderSince},
	{"TreeMainKilled", testTreeMainKilled},
	{"TreeKill9", testTreeKill9},
	{"TreeIgnoresTerm", testTreeIgnoresTerm},
	{"ContainmentRefused", testContainmentRefused},
	{"StoreRefusesWrites", testStoreRefusesWrites},
	{"Quorum", testQuorum},             // a Redlock quorum's servers, one by one
	{"StoreRestart", testStoreRestart}, // last: Redis comes back empty
}

// TestBackends runs every scenario against a real etcd and a real Redis;
// the two backends run in parallel, each on its own server.
func TestBackends(t *testing.T) {
	kit.Run(t, kit.Selected(t, "E2E_BACKENDS"), func(t *testing.T, s *kit.Store) {
		for _, sc := range scenarios {
			t.Run(sc.name, func(t *testing.T) { sc.run(t, s) })
		}
	})
}
