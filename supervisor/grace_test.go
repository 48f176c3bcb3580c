package supervisor

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestSuspendDuringGraceKills (hole 4 of issue 23): the host is suspended
// while the child's tree, which ignores the stop signal, has its grace
// period. Once electd runs again the grace ends at once with SIGKILL to
// the tree, and the term is given up well before the rest of the grace
// would have passed: the store may already have handed the term on.
func TestSuspendDuringGraceKills(t *testing.T) {
	const stopTimeout = 5 * time.Second
	tests := []struct {
		name    string
		suspend time.Duration
	}{
		{name: "longer than the grace", suspend: time.Minute},
		{name: "shorter than the grace, beyond the bound", suspend: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			needMode(t, ContainPgroup)
			cmd, pidFile := treeChild(t, true, false, false)
			logs := newSyncBuf()
			th := &treeHarness{pidFile: pidFile}
			th.harness = newHarness(t, func(c *Config) {
				c.Command, c.Containment, c.StopTimeout = cmd, ContainPgroup, stopTimeout
				c.Logger = slog.New(slog.NewTextHandler(logs, nil))
			})
			th.grant(t, 70)
			pids := treePids(t, pidFile)
			resigned := make(chan error, 1)
			go func() { resigned <- th.sup.Resign(context.Background()) }()
			logs.waitFor(t, "msg=stopping")
			// Armed once the grace waits: the deadline's timer, the stop
			// timer, endChild's bound, and the grace's timeout and poll.
			waitFor(t, "the grace to begin", func() bool { return th.clk.Pending() == 5 })
			th.clk.Advance(300 * time.Millisecond)
			suspendedAt := time.Now()
			th.clk.Suspend(tt.suspend)
			// The monotonic clock runs on in small steps after the resume,
			// never near the rest of the grace (4.7 s).
			advanced := time.Duration(0)
			waitFor(t, "the term given up", func() bool {
				select {
				case <-th.resigns:
					return true
				default:
				}
				if advanced < 500*time.Millisecond {
					th.clk.Advance(10 * time.Millisecond)
					advanced += 10 * time.Millisecond
				}
				return false
			})
			took := time.Since(suspendedAt)
			th.mu.Lock()
			alive := th.aliveAtEnd[len(th.aliveAtEnd)-1]
			th.mu.Unlock()
			if len(alive) > 0 {
				t.Fatalf("workers %v of %v alive when the term was given up", alive, pids)
			}
			if took > 3*time.Second {
				t.Fatalf("the term was given up %s after the resume: the grace ran on (real time) past a suspension", took.Round(time.Millisecond))
			}
			if !th.ev.has("child_exited:killed") {
				t.Fatalf("the tree was not SIGKILLed; events %v", th.ev.events)
			}
			if !strings.Contains(logs.String(), "suspended") {
				t.Errorf("no log line names the suspension:\n%s", logs.String())
			}
			if err := <-resigned; err != nil {
				t.Fatal(err)
			}
		})
	}
}
