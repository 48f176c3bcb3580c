package kit

import (
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/internal/testenv"
)

// readTimeout bounds one read of a store's state (Queued, LastRun).
const readTimeout = 5 * time.Second

// lifecycle is what an entry kills and starts: the testenv value it
// started, or (redlockAll) every server of a quorum.
type lifecycle interface {
	Kill(t testing.TB)
	Start(t testing.TB)
}

// servers is what every implementation of Servers shares: the store's
// URL and that of proxies in front of its servers, how a client is cut
// off, and the Kill and Start of what the entry started.
type servers struct {
	value  any // what the entry started, for As
	srv    lifecycle
	scheme string // of a URL that names proxies
	url    string // the store's own
	reach  Reach
	// t is the entry's: the clients that read the store are made on first
	// use and closed when it ends.
	t testing.TB
}

func (s *servers) Dial(addrs []string) Dial {
	if addrs == nil {
		return Dial{URL: s.url}
	}
	return Dial{URL: s.scheme + "://" + strings.Join(addrs, ",")}
}

func (s *servers) Reach() Reach { return s.reach }

func (s *servers) Kill(t testing.TB) { t.Helper(); s.srv.Kill(t) }

func (s *servers) Start(t testing.TB) { t.Helper(); s.srv.Start(t) }

func (s *servers) started() any { return s.value }

// ports are the ports of addrs (host:port).
func ports(addrs []string) []string {
	var out []string
	for _, a := range addrs {
		out = append(out, a[strings.LastIndex(a, ":")+1:])
	}
	return out
}

// nodePorts are the client ports of a topology's Redis nodes.
func nodePorts(nodes []*testenv.RedisNode) []string {
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.Addr())
	}
	return ports(addrs)
}
