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
var scenarios = []kit.Test{
	{Name: "ThreeCopies", Run: testThreeCopies},
	{Name: "SIGTERMLeader", Run: testSIGTERMLeader},
	{Name: "Kill9Leader", Run: testKill9Leader},
	{Name: "CutOffLeader", Run: testCutOffLeader},
	{Name: "ResignEndpoint", Run: testResignEndpoint},
	{Name: "Switchover", Run: testSwitchover},
	{Name: "OnExit", Run: testOnExit},
	{Name: "StopTimeout", Run: testStopTimeout},
	{Name: "Grandchildren", Run: testGrandchildren},
	{Name: "Environment", Run: testEnvironment},
	{Name: "LeaderSince", Run: testLeaderSince},
	{Name: "TreeMainKilled", Run: testTreeMainKilled},
	{Name: "TreeKill9", Run: testTreeKill9},
	{Name: "TreeIgnoresTerm", Run: testTreeIgnoresTerm},
	{Name: "ContainmentRefused", Run: testContainmentRefused},
	{Name: "StoreRefusesWrites", Run: testStoreRefusesWrites},
	{Name: "Quorum", Run: testQuorum},             // a Redlock quorum's servers, one by one
	{Name: "StoreRestart", Run: testStoreRestart}, // last: Redis comes back empty
}

// TestBackends runs every scenario against a real etcd and a real Redis;
// the two backends run in parallel, each on its own server.
func TestBackends(t *testing.T) {
	kit.RunTests(t, "E2E", scenarios)
}
