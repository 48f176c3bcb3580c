package redlock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/backend"
	"github.com/electd/electd/elector/internal/rediskit"
)

// membersEvery bounds the cost of Members: at most one PING per server
// per second, however often /healthz is asked.
const membersEvery = time.Second

// members caches the last check of every server.
type members struct {
	mu   sync.Mutex
	at   time.Time
	last []backend.Member
}

// Members reports each server of the quorum, in the URL's order: whether
// it answers a PING within a second, and why not. Every server is in use
// (each request goes to all); none has a leader of its own; the quorum
// works while a majority answers (Member.Quorum).
func (c *conn) Members(ctx context.Context) ([]backend.Member, error) {
	c.members.mu.Lock()
	defer c.members.mu.Unlock()
	if c.members.last != nil && time.Since(c.members.at) < membersEvery {
		return append([]backend.Member(nil), c.members.last...), nil
	}
	ms := make([]backend.Member, len(c.servers))
	fanOut(len(ms), func(i int) {
		s := c.servers[i]
		ms[i] = backend.Member{Endpoint: s.Addr, InUse: true, Quorum: majority(len(c.servers))}
		pctx, cancel := context.WithTimeout(ctx, membersEvery)
		defer cancel()
		if err := s.Client.Ping(pctx).Err(); err != nil {
			err = rediskit.Classify(err)
			ms[i].Error = fmt.Sprintf("%s: %v", elector.ErrorClass(err), err)
			return
		}
		ms[i].Answers = true
	})
	if ctx.Err() != nil {
		return ms, ctx.Err() // not cached: cut short by the caller
	}
	c.members.at, c.members.last = time.Now(), ms
	return append([]backend.Member(nil), ms...), nil
}
