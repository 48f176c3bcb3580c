package store

import (
	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/etcd"
	"github.com/electd/electd/elector/redis"
)

// backends are the stores electd can campaign in, one line each. Adding a
// backend is its package under elector/ (with an elector.Backend value)
// and its line here.
var backends = []*elector.Backend{
	&etcd.Backend,
	&redis.Backend,
}
