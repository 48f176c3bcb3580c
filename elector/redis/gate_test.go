package redis

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
)

// The gate that holds a client's commands, for the tests that cut one
// candidate off from a server the others still reach (epoch_test.go,
// scripts_test.go).

// gate is a go-redis hook that holds a client's commands while shut: each
// waits until the gate opens (or its context ends) before it is sent.
type gate struct {
	mu       sync.Mutex
	opened   chan struct{} // closed while open
	inflight int           // commands past the gate, not yet answered
	idle     *sync.Cond    // signalled when inflight drops to 0
}

func newGate() *gate {
	g := &gate{opened: make(chan struct{})}
	close(g.opened)
	g.idle = sync.NewCond(&g.mu)
	return g
}

// gatedLeader makes candidate a of election at ttl on addr, every command
// of its client passing a gate (open until the test shuts it), and waits
// up to 5 TTLs for a to lead. The gate opens again before the cleanups
// close a.
func gatedLeader(ctx context.Context, t *testing.T, addr, election string, ttl time.Duration) (*gate, electortest.Result) {
	t.Helper()
	g := newGate()
	cli := newClient(t, addr)
	cli.AddHook(g)
	a := newElectorWith(t, Config{Client: cli, Candidate: elector.Candidate{
		Election: election, ID: "a", Timing: elector.Timing{TTL: ttl}}})
	t.Cleanup(g.open) // registered after a's Close, so run before it
	return g, electortest.MustLead(t, electortest.Campaign(ctx, a), 5*ttl, "a")
}

// shut holds every command from now on, and returns once none sent
// before is still unanswered.
func (g *gate) shut(t testing.TB) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.opened:
		g.opened = make(chan struct{})
	default:
		t.Fatal("gate shut twice")
	}
	for g.inflight > 0 {
		g.idle.Wait() // each command is bounded by its context
	}
}

// open lets held and later commands through.
func (g *gate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.opened:
	default:
		close(g.opened)
	}
}

// enter waits until the gate is open and counts the command in flight.
func (g *gate) enter(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for {
		ch := g.opened
		select {
		case <-ch:
			g.inflight++
			return nil
		default:
		}
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			g.mu.Lock()
			return ctx.Err()
		}
		g.mu.Lock()
	}
}

func (g *gate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inflight--; g.inflight == 0 {
		g.idle.Broadcast()
	}
}

func (g *gate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if err := g.enter(ctx); err != nil {
			cmd.SetErr(err)
			return err
		}
		defer g.leave()
		return next(ctx, cmd)
	}
}

func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if err := g.enter(ctx); err != nil {
			for _, c := range cmds {
				c.SetErr(err)
			}
			return err
		}
		defer g.leave()
		return next(ctx, cmds)
	}
}
