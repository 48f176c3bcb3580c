package rediskit

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
)

// replyError is an error reply as go-redis returns it (a redis.Error).
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

var _ redis.Error = replyError("")

func TestPatience(t *testing.T) {
	timeout := fmt.Errorf("renew: %w", context.DeadlineExceeded)
	reply := replyError("LOADING Redis is loading the dataset in memory")
	tests := []struct {
		name     string
		outcomes []error
		want     time.Duration
	}{
		{"fresh", nil, 400 * time.Millisecond},
		{"one timeout doubles", []error{timeout}, 800 * time.Millisecond},
		{"timeouts stop at max", []error{timeout, timeout, timeout, timeout}, time.Second},
		{"a reply halves", []error{timeout, timeout, nil}, 500 * time.Millisecond},
		{"never below base", []error{timeout, nil, nil, nil}, 400 * time.Millisecond},
		{"an error reply is a reply", []error{timeout, timeout, reply}, 500 * time.Millisecond},
		{"a reset connection leaves it", []error{timeout, io.EOF}, 800 * time.Millisecond},
		{"a classified timeout", []error{elector.Classify(elector.ClassTimeout, timeout)}, 800 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := PatienceFor(400*time.Millisecond, elector.Timing{TTL: 2 * time.Second})
			for _, err := range tt.outcomes {
				p.Observe(err)
			}
			if got := p.Timeout(); got != tt.want {
				t.Errorf("after %v: timeout %s, want %s", tt.outcomes, got, tt.want)
			}
		})
	}
}
