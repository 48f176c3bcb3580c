package health

import (
	"slices"
	"strings"
	"sync"
	"time"
)

// StoreFailure is a store operation that fails now: /healthz lists it.
type StoreFailure struct {
	Op       string    `json:"op"`       // "renew", "campaign", "watch", ...
	Class    string    `json:"class"`    // of the last error (elector.ErrorClass)
	Error    string    `json:"error"`    // the last error
	Failures int       `json:"failures"` // since it began failing
	Since    time.Time `json:"since"`    // first failure of this outage
	Last     time.Time `json:"last"`     // the last failure
}

// failingFor is how long after its last failure an operation still counts
// as failing without a word of its end: every request a backend retries
// fails again within it (backoff of at most a second, a request's timeout
// of one renewal interval: ttl/5, so up to a ttl of 150 s), and one it gave
// up on without saying so stops counting after it.
const failingFor = 30 * time.Second

// storeFailures tracks, per op, the outage in progress.
type storeFailures struct {
	mu  sync.Mutex
	ops map[string]*StoreFailure
	now func() time.Time // time.Now; tests set it
}

func (s *storeFailures) failed(op, class string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ops == nil {
		s.ops = map[string]*StoreFailure{}
	}
	now := s.clock()
	f := s.ops[op]
	if f == nil {
		f = &StoreFailure{Op: op, Since: now}
		s.ops[op] = f
	}
	f.Class, f.Error, f.Last = class, err.Error(), now
	f.Failures++
}

func (s *storeFailures) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

func (s *storeFailures) answered(op string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.ops, op)
}

func (s *storeFailures) list() []StoreFailure {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	out := make([]StoreFailure, 0, len(s.ops))
	for op, f := range s.ops {
		if now.Sub(f.Last) > failingFor {
			delete(s.ops, op) // given up on, or its end was not reported
			continue
		}
		out = append(out, *f)
	}
	slices.SortFunc(out, func(a, b StoreFailure) int { return strings.Compare(a.Op, b.Op) })
	return out
}
