package main

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/electd/electd/supervisor"
)

// TestGroupReportsMainsError: when main fails, superviseGroup returns its
// error, though the helpers (signal forwarding, reaping) return as soon as
// main's deferred stop runs and the group may hear from them first. It once
// returned nil then, and electd exited 0 after Redis refused its
// credentials (TestRedisCredentialsRevoked, about one run in five).
func TestGroupReportsMainsError(t *testing.T) {
	errBoom := errors.New("campaign: refused")
	log := slog.New(slog.DiscardHandler)
	for i := range 300 {
		sigs := catchShutdown()
		_, sig, err := superviseGroup(context.Background(), log, sigs, &supervisor.Supervisor{},
			func(context.Context) error { return errBoom })
		sigs.Stop()
		if !errors.Is(err, errBoom) || sig != 0 {
			t.Fatalf("run %d: superviseGroup = %v (signal %d), want main's error %v", i, err, sig, errBoom)
		}
	}
}
