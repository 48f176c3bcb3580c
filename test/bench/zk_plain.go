package main

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	gozk "github.com/go-zookeeper/zk"
)

// plainLock is the textbook ZooKeeper lock recipe on go-zookeeper, as
// ZooKeeper's "Recipes and Solutions" gives it: an ephemeral sequential
// node under the lock's node; the lowest holds; every other watches the
// node just ahead of it (exists with a watch) and looks again when that
// goes. A holder believes it holds until its session expires (the
// client's StateExpired, which go-zookeeper learns only from the server,
// on reconnection) or its node is gone: that is when its guarded code
// stops. It also notes when the client first saw StateDisconnected while
// holding, which a more careful holder could take as its cue.
type plainLock struct {
	id     string
	parent string
	conn   *gozk.Conn
	ev     <-chan gozk.Event
	node   string // our node's name

	mu           sync.Mutex
	started      time.Time // became the holder: the guarded code starts
	stopped      time.Time // saw its node gone or its session expired
	disconnected time.Time // first StateDisconnected while holding
	err          error

	quit chan struct{}
	done chan struct{} // closed when run returns
}

// startPlain connects to addrs (a session of ttl), queues on lock name
// and runs the recipe until close.
func startPlain(addrs []string, name, id string, ttl time.Duration) (*plainLock, error) {
	conn, ev, err := zkConnect(addrs, ttl)
	if err != nil {
		return nil, err
	}
	p := &plainLock{id: id, parent: "/plain/" + name, conn: conn, ev: ev, quit: make(chan struct{}), done: make(chan struct{})}
	for _, path := range []string{"/plain", p.parent} {
		if _, err := conn.Create(path, nil, 0, gozk.WorldACL(gozk.PermAll)); err != nil && !errors.Is(err, gozk.ErrNodeExists) {
			conn.Close()
			return nil, fmt.Errorf("plain %s: create %s: %w", id, path, err)
		}
	}
	path, err := conn.Create(p.parent+"/lock-", []byte(id), gozk.FlagEphemeral|gozk.FlagSequence, gozk.WorldACL(gozk.PermAll))
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("plain %s: create its node: %w", id, err)
	}
	p.node = path[strings.LastIndexByte(path, '/')+1:]
	go p.run()
	return p, nil
}

// close stops the recipe and closes the session (first: a request in
// flight then fails at once), then waits for run to return.
func (p *plainLock) close() {
	close(p.quit)
	p.conn.Close()
	<-p.done
}

func (p *plainLock) times() (started, stopped, disconnected time.Time, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.started, p.stopped, p.disconnected, p.err
}

func (p *plainLock) set(f func()) {
	p.mu.Lock()
	f()
	p.mu.Unlock()
}

// run waits its turn, then holds until its node is gone or its session
// expired.
func (p *plainLock) run() {
	defer close(p.done)
	if !p.await() {
		return
	}
	p.set(func() { p.started = time.Now() })
	for {
		ok, _, w, err := p.conn.ExistsW(p.parent + "/" + p.node)
		switch {
		case errors.Is(err, gozk.ErrSessionExpired):
			p.set(func() { p.stopped = time.Now() })
			return
		case err != nil:
			// Connection loss: the recipe holds on; it asks again.
			if !p.pause() {
				return
			}
			continue
		case !ok:
			p.set(func() { p.stopped = time.Now() })
			return
		}
		if p.hold(w) {
			return
		}
	}
}

// hold waits on the node's watch and the session's events; true once the
// holder has stopped (or is told to quit), false to set the watch again.
func (p *plainLock) hold(w <-chan gozk.Event) bool {
	for {
		select {
		case ev := <-w:
			if ev.Type == gozk.EventNodeDeleted || errors.Is(ev.Err, gozk.ErrSessionExpired) {
				p.set(func() { p.stopped = time.Now() })
				return true
			}
			return false
		case ev := <-p.ev:
			switch ev.State {
			case gozk.StateExpired:
				p.set(func() { p.stopped = time.Now() })
				return true
			case gozk.StateDisconnected:
				p.set(func() {
					if p.disconnected.IsZero() {
						p.disconnected = time.Now()
					}
				})
			}
		case <-p.quit:
			return true
		}
	}
}

// pause waits a little before a retry; false when told to quit.
func (p *plainLock) pause() bool {
	t := time.NewTimer(50 * time.Millisecond)
	defer t.Stop()
	select {
	case <-p.quit:
		return false
	case <-t.C:
		return true
	}
}

// await returns true once its node is the lowest; false on quit or a
// session lost before it held.
func (p *plainLock) await() bool {
	for {
		names, _, err := p.conn.Children(p.parent)
		if err != nil {
			if errors.Is(err, gozk.ErrSessionExpired) {
				p.set(func() { p.err = fmt.Errorf("plain %s: session expired while queued", p.id) })
				return false
			}
			if !p.pause() {
				return false
			}
			continue
		}
		sort.Slice(names, func(i, j int) bool { return seqSuffix(names[i]) < seqSuffix(names[j]) })
		i := -1
		for j, n := range names {
			if n == p.node {
				i = j
			}
		}
		switch {
		case i < 0:
			p.set(func() { p.err = fmt.Errorf("plain %s: its node is gone while queued", p.id) })
			return false
		case i == 0:
			return true
		}
		ok, _, w, err := p.conn.ExistsW(p.parent + "/" + names[i-1])
		if err != nil && !p.pause() {
			return false
		}
		if err != nil || !ok {
			continue
		}
		select {
		case <-w:
		case <-p.ev: // a session event while queued: look again
		case <-p.quit:
			return false
		}
	}
}

// seqSuffix is a sequential node's 10-digit counter.
func seqSuffix(name string) string {
	if len(name) < 10 {
		return name
	}
	return name[len(name)-10:]
}
