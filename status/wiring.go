package status

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/store"
)

// NewReader reads election through el, a candidate on st that never
// campaigns (or one that does: a reading does not touch the election).
func NewReader(election string, el elector.Locker, st *store.Store) (Reader, error) {
	src, ok := el.(Source)
	if !ok {
		return Reader{}, fmt.Errorf("the store %s cannot show an election's line", st.Redacted())
	}
	return Reader{Election: election, Source: src, StoreURL: st.Redacted(), Ping: st.Ping}, nil
}

// Endpoint is GET /status of `electd run` (health.Config.Status): a
// reading of election through el, and whether it succeeded; nil (501)
// for a store that cannot show its line.
func Endpoint(election string, el elector.Locker, st *store.Store) func(ctx context.Context) (any, bool) {
	r, err := NewReader(election, el, st)
	if err != nil {
		return nil
	}
	return func(ctx context.Context) (any, bool) {
		rep, err := r.Read(ctx)
		return rep, err == nil
	}
}

// Write writes rep as JSON (one object) or as text.
func (r Report) Write(w io.Writer, asJSON bool) error {
	var err error
	if asJSON {
		err = json.NewEncoder(w).Encode(r)
	} else {
		err = r.WriteText(w)
	}
	if err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// Holders reads every holder of el's election if it is a semaphore
// (Slots > 1), first in line first; nil, nil for a plain election, whose
// leader is its only holder.
func Holders(ctx context.Context, el elector.Elector) ([]elector.Leader, error) {
	q, ok := el.(elector.Queuer)
	if !ok {
		return nil, nil
	}
	line, err := q.Queue(ctx)
	if err != nil || line.Slots <= 1 {
		return nil, err
	}
	var ls []elector.Leader
	for _, h := range line.Holders() {
		ls = append(ls, h.Leader())
	}
	return ls, nil
}

// HoldersEndpoint is Holders for GET /leader (health.Config.Holders) of a
// semaphore of slots; nil for a plain election, whose /leader never asks
// the store.
func HoldersEndpoint(el elector.Elector, slots int) func(ctx context.Context) ([]elector.Leader, error) {
	if slots <= 1 {
		return nil
	}
	return func(ctx context.Context) ([]elector.Leader, error) { return Holders(ctx, el) }
}
