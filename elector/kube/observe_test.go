package kube_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/testenv"
)

// TestCloseWhileObservingLogsNoFailure: closing an Elector whose view is
// still listing or watching (electd leader exiting at once) ends its
// requests with the context, which is not a store failure: nothing is
// logged above Info.
func TestCloseWhileObservingLogsNoFailure(t *testing.T) {
	h := &harness{k: testenv.StartKube(t)}
	logs, log := electortest.NewLogs()
	for i := range 20 {
		el := h.New(t, electortest.Candidate{StoreAddr: h.Addr(), Candidate: elector.Candidate{
			Election: fmt.Sprintf("observe-close-%d", i), ID: "o", Timing: elector.Timing{TTL: 2 * time.Second}, Logger: log}})
		ctx, cancel := context.WithCancel(context.Background())
		ch := el.Observe(ctx)
		// Close at once on even rounds; after the first value on odd ones.
		if i%2 == 1 {
			select {
			case <-ch:
			case <-time.After(10 * time.Second):
				t.Fatal("no first value from the view")
			}
		}
		if err := el.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		cancel()
	}
	if bad := logs.Lines(func(l electortest.LogLine) bool { return l.Level > slog.LevelInfo }); len(bad) > 0 {
		for _, l := range bad {
			t.Errorf("%s %s %v", l.Level, l.Msg, l.Attrs)
		}
	}
}
