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
var scenarios = []kit.Test{
	{Name: "MutualExclusion", Run: testMutualExclusion},
	{Name: "Handover", Run: testHandover},
	{Name: "Busy", Run: testBusy},
	{Name: "SignalsLeaveNothing", Run: testSignals},
	{Name: "ExitCodes", Run: testExitCodes},
	{Name: "LostLockStopsCommand", Run: testLostLock},
	{Name: "Slots", Run: testSlots},
	{Name: "SlotsMismatch", Run: testSlotsMismatch},
	{Name: "OncePer", Run: testOncePer},
	{Name: "OncePerFailedRunRetries", Run: testOncePerRetry},
	{Name: "LeaderWatch", Run: testLeaderWatch},
	{Name: "TreeMainKilled", Run: testTreeMainKilled},
	{Name: "ContainmentRefused", Run: testContainmentRefused},
}

// TestBackends runs every scenario against a real etcd and a real Redis;
// the two backends run in parallel, each on its own server.
func TestBackends(t *testing.T) {
	kit.RunTests(t, "LOCK", scenarios)
}
