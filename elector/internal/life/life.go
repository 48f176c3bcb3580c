// Package life is the lifecycle every backend's Elector shares: the
// goroutines Close waits for, one campaign or term at a time, the term
// Close ends, and the context Close cancels. A backend keeps what is its
// own (the requests of a campaign, a term's renewals) and asks Life to
// admit, start and stop them.
package life

import (
	"context"
	"errors"
	"sync"

	"github.com/electd/electd/elector"
)

// ErrBusy refuses a second campaign on an Elector that is campaigning or
// leading.
var ErrBusy = errors.New("a campaign or term is already active on this elector")

// Life is an Elector's lifecycle. Create it with New; it is safe for
// concurrent use.
type Life struct {
	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	busy   bool              // a campaign is running
	term   *elector.Deadline // the current term's deadline, if any
	wg     sync.WaitGroup    // every goroutine started by Go, running campaigns, terms
	done   chan struct{}     // closed when Close has finished
}

// New returns a Life that is open.
func New() *Life {
	l := &Life{done: make(chan struct{})}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	return l
}

// Context is cancelled when Close begins.
func (l *Life) Context() context.Context { return l.ctx }

// Go runs f in a goroutine that Close waits for; it reports false (and
// does not run f) once Close has begun.
func (l *Life) Go(f func()) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		f()
	}()
	return true
}

// Campaign admits one campaign: elector.ErrClosed once Close has begun,
// ErrBusy while another campaign runs or a term lasts. It returns ctx
// that Close cancels too, and end, which the campaign calls when it
// returns (Close waits for it).
func (l *Life) Campaign(ctx context.Context) (context.Context, func(), error) {
	l.mu.Lock()
	switch {
	case l.closed:
		l.mu.Unlock()
		return nil, nil, elector.ErrClosed
	case l.busy || (l.term != nil && l.term.Err() == nil):
		l.mu.Unlock()
		return nil, nil, ErrBusy
	}
	l.busy = true
	l.wg.Add(1) // Close waits for the campaign's cleanup
	l.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(l.ctx, cancel)
	return ctx, func() {
		stop()
		cancel()
		l.mu.Lock()
		l.busy = false
		l.mu.Unlock()
		l.wg.Done()
	}, nil
}

// Lead makes dl the current term and runs keep (its renewals) in a
// goroutine Close waits for. Once Close has begun it starts nothing, and
// reports false: the caller ends dl and cleans up.
func (l *Life) Lead(dl *elector.Deadline, keep func()) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.term = dl
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		keep()
	}()
	return true
}

// Close, the first time: cancels Context, ends the current term with
// elector.ErrClosed, runs stop (the backend's own shutdown of what Go did
// not start), waits for every goroutine and campaign, runs drained (nil:
// none), and reports true. Later calls wait for the first to finish and
// report false.
func (l *Life) Close(stop, drained func()) bool {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		<-l.done
		return false
	}
	l.closed = true
	dl := l.term
	l.mu.Unlock()
	l.cancel()
	if dl != nil {
		dl.End(elector.ErrClosed)
	}
	if stop != nil {
		stop()
	}
	l.wg.Wait()
	if drained != nil {
		drained()
	}
	close(l.done)
	return true
}
