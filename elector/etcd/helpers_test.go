package etcd_test

import (
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electd/electd/elector"
)

func timingOf(ttl time.Duration) elector.Timing { return elector.Timing{TTL: ttl} }

func clientv3WithPrefixCount() []clientv3.OpOption {
	return []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithCountOnly()}
}
