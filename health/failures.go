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
}

// storeFailures tracks, per op, the outage in progress.
type storeFailures struct {
	mu  sync.Mutex
	ops map[string]*StoreFailure
}

func (s *storeFailures) failed(op, class string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ops == nil {
		s.ops = map[string]*StoreFailure{}
	}
	f := s.ops[op]
	if f == nil {
		f = &StoreFailure{Op: op, Since: time.Now()}
		s.ops[op] = f
	}
	f.Class, f.Error = class, err.Error()
	f.Failures++
}

func (s *storeFailures) answered(op string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.ops, op)
}

func (s *storeFailures) list() []StoreFailure {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]StoreFailure, 0, len(s.ops))
	for _, f := range s.ops {
		out = append(out, *f)
	}
	slices.SortFunc(out, func(a, b StoreFailure) int { return strings.Compare(a.Op, b.Op) })
	return out
}
