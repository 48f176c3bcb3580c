package store

import (
	"context"

	"github.com/electd/electd/elector/backend"
)

// memberReporter is a connection to a store that runs as several members
// (etcd) and can say how each is doing (see backend.Member).
type memberReporter interface {
	Members(ctx context.Context) ([]backend.Member, error)
}

// Members reports each member of a store that runs as several (the hosts
// of an etcd:// URL, in order): its id and name, whether it answers,
// the leader it follows, and whether electd's requests go to it. It is
// nil, nil for a store that does not report members (the Redis
// backends). The backend bounds its cost (etcd: at most one check per
// second however often it is asked); ctx bounds the wait. Errors carry no
// credentials.
func (s *Store) Members(ctx context.Context) ([]backend.Member, error) {
	r, ok := s.conn.(memberReporter)
	if !ok {
		return nil, nil
	}
	ms, err := r.Members(ctx)
	for i := range ms {
		ms[i].Error = s.url.secrets.scrub(ms[i].Error)
	}
	return ms, s.url.secrets.err(err)
}
