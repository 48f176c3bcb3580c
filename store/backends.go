package store

import (
	"github.com/electd/electd/elector/backend"
	"github.com/electd/electd/elector/etcd"
	"github.com/electd/electd/elector/kube"
	"github.com/electd/electd/elector/redis"
	"github.com/electd/electd/elector/redlock"
	"github.com/electd/electd/elector/zk"
)

// backends are the stores electd can campaign in, one line each. Adding a
// backend is its package under elector/ (with a backend.Backend value)
// and its line here; the --store help, the flags of its secrets, the
// errors that list schemes and the check of the README's table of store
// URLs follow from this list (registry.go).
var backends = []*backend.Backend{
	&etcd.Backend,
	&redis.Backend,
	&redis.SentinelBackend,
	&redis.ClusterBackend,
	&redlock.Backend,
	&kube.Backend,
	&zk.Backend,
}
