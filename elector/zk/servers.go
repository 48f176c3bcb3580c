package zk

import (
	"sync"

	"github.com/go-zookeeper/zk"
)

// servers is go-zookeeper's DNS host provider, but it asks the client to
// pause (a second, retryStart) only once every server has been tried
// since the last connection. go-zookeeper's own pauses before it tries
// again the server it was connected to, so a client of one server that
// lost its connection (a reset, a server restart) waited a second before
// its first try, most of a short session's window.
type servers struct {
	zk.DNSHostProvider
	mu    sync.Mutex
	tried int // servers tried since the last connection
}

// Next is the next server to try; retryStart once all have been tried
// since the last connection.
func (h *servers) Next() (string, bool) {
	server, _ := h.DNSHostProvider.Next()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tried++
	return server, h.tried > h.Len()
}

// Connected notes a connection: the next loss tries every server once
// before pausing.
func (h *servers) Connected() {
	h.DNSHostProvider.Connected()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tried = 0
}
