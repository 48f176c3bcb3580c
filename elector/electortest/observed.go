package electortest

import (
	"fmt"
	"testing"
	"time"

	"github.com/electd/electd/elector"
)

// checkObserved checks what an observer received (seen, in order) against
// the terms an election granted (terms, in order: each its holder's own
// Leader record), in an election with no leader before the first term and
// none after the last. Observe sends the current leader and then every
// change, and may send a term again with its exact Since (elector.Elector):
// with such repeats folded (Leader.SameTerm), seen must be "no leader",
// each of terms in turn, and "no leader" last. Tokens only grow: a value
// after another holder's has a greater token. Besides those, and nothing
// else, it may hold:
//
//   - "no leader" between two terms: a term that ended (Resign ends it
//     before its holder hands over) while the next is not yet the store's.
//     On a quorum store a hand-over lands server by server, and while
//     neither holder is named by a majority there is none: the leaver held
//     fewer than all the servers, or the successor withdrew part of it.
//   - Before a term, its holder with a lower token: a grant the store
//     committed to it that it did not lead with. A redlock successor that
//     finds the hand-over token committed to it on a minority while a
//     majority still names the leaver withdraws it, and commits a token of
//     its own over it once the rest of the hand-over has landed; meanwhile
//     a majority may name it with the hand-over token, and, as the
//     hand-over and the withdraw land on different servers, cease to and
//     name it again.
//   - "No leader" for a moment, then the same term again. An observer of a
//     quorum store holds each server's word as of that server's last
//     message, and the servers' messages reach it with different delays:
//     around a change, a server's fresh word (the holder left there) with
//     another's stale one (the previous holder, not yet replaced there) may
//     make no majority while the store's servers still do.
//
// It returns nil when seen matches, else what is wrong with it.
func checkObserved(seen, terms []elector.Leader) error {
	var folded []elector.Leader
	for i, l := range seen {
		if i > 0 && l.SameTerm(seen[i-1]) {
			continue
		}
		folded = append(folded, l)
	}
	if len(folded) == 0 || !folded[0].IsZero() {
		return fmt.Errorf("the first value is not \"no leader\"")
	}
	next := 0               // the index in terms of the next term to be seen
	var prev elector.Leader // the last leader seen before l
	for _, l := range folded[1:] {
		if l.IsZero() {
			continue
		}
		if !prev.IsZero() {
			if l.Token < prev.Token || l.Token == prev.Token && !l.SameTerm(prev) {
				return fmt.Errorf("%s with token %d after %s with token %d: tokens only grow", l.ID, l.Token, prev.ID, prev.Token)
			}
		}
		again := !prev.IsZero() && l.SameTerm(prev) // with "no leader" between
		prev = l
		switch {
		case again:
			// The same term or grant for a moment after "no leader".
		case next < len(terms) && l.SameTerm(terms[next]):
			next++
		case next < len(terms) && l.ID == terms[next].ID && l.Token < terms[next].Token:
			// A grant committed to the next holder, not its term.
		case next < len(terms):
			return fmt.Errorf("%s with token %d where the next term is %s's with token %d", l.ID, l.Token, terms[next].ID, terms[next].Token)
		default:
			return fmt.Errorf("%s with token %d after the last term", l.ID, l.Token)
		}
	}
	if next < len(terms) {
		return fmt.Errorf("%s's term with token %d not seen", terms[next].ID, terms[next].Token)
	}
	if last := folded[len(folded)-1]; !last.IsZero() {
		return fmt.Errorf("the last value is %s with token %d, not \"no leader\"", last.ID, last.Token)
	}
	return nil
}

// values returns a copy of everything the observer received, in order.
func (o *observer) values() []elector.Leader {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]elector.Leader(nil), o.seen...)
}

// awaitLast waits up to within for the last value received to satisfy
// cond, and fails the test with everything received otherwise.
func (o *observer) awaitLast(t testing.TB, within time.Duration, what string, cond func(elector.Leader) bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if l, ok := o.last(); ok && cond(l) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; observed %v", within, what, o)
		}
		time.Sleep(5 * time.Millisecond) // polling the observer's record, not synchronising
	}
}
