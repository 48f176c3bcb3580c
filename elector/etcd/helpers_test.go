package etcd_test

import (
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electd/electd/elector"
)

func timingOf(ttl time.Duration) elector.Timing { return elector.Timing{TTL: ttl} }

func clientv3WithPrefixCount() []clientv3.OpOption {
	return []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithCountOnly()}
}

// storeErrors counts one candidate's retried store errors by "op class".
type storeErrors struct {
	elector.NopInstrument
	mu sync.Mutex
	by map[string]int
}

func (s *storeErrors) StoreError(op string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by == nil {
		s.by = map[string]int{}
	}
	s.by[op+" "+elector.ErrorClass(err)]++
}

func (s *storeErrors) StoreAnswered(string) {}

// count is the errors of op, of every class.
func (s *storeErrors) count(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, v := range s.by {
		if strings.HasPrefix(k, op+" ") {
			n += v
		}
	}
	return n
}

func (s *storeErrors) snapshot() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.by))
	for k, v := range s.by {
		out[k] = v
	}
	return out
}
