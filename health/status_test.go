package health

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/electd/electd/elector"
)

// TestStatusEndpoint: GET /status serves Config.Status's report, 200 when
// the store answered it, 503 when not, 501 when the process serves none.
func TestStatusEndpoint(t *testing.T) {
	tests := []struct {
		name   string
		status func(context.Context) (any, bool)
		code   int
		want   map[string]any
	}{
		{name: "not served", code: 501, want: map[string]any{"error": "status is not served by this process"}},
		{name: "store answered", status: func(context.Context) (any, bool) { return map[string]any{"slots": 2}, true },
			code: 200, want: map[string]any{"slots": 2.0}},
		{name: "store unreachable", status: func(context.Context) (any, bool) {
			return map[string]any{"store": map[string]any{"reachable": false}}, false
		}, code: 503, want: map[string]any{"store": map[string]any{"reachable": false}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newTestServer(t, func(c *Config) { c.Status = tc.status })
			w := do(t, s, "GET", "/status", "192.0.2.1:5555", nil)
			if w.Code != tc.code {
				t.Errorf("code = %d, want %d", w.Code, tc.code)
			}
			if m := decode(t, w); !reflect.DeepEqual(m, tc.want) {
				t.Errorf("body = %v, want %v", m, tc.want)
			}
		})
	}
}

// TestLeaderHolders: with Config.Holders (a semaphore), /leader lists
// every holder; when they cannot be read, the leader alone.
func TestLeaderHolders(t *testing.T) {
	a, b := leader("a", 3), leader("b", 5)
	asJSON := func(l elector.Leader) any {
		return map[string]any{"id": l.ID, "address": l.Address, "fencing_token": float64(l.Token),
			"since": l.Since.UTC().Format("2006-01-02T15:04:05.999999999Z07:00")}
	}
	tests := []struct {
		name    string
		holders func(context.Context) ([]elector.Leader, error)
		busy    bool // every store read is taken by other requests
		want    []any
	}{
		{name: "every holder", holders: func(context.Context) ([]elector.Leader, error) { return []elector.Leader{a, b}, nil },
			want: []any{asJSON(a), asJSON(b)}},
		{name: "store does not answer", holders: func(context.Context) ([]elector.Leader, error) { return nil, errors.New("timeout") },
			want: []any{asJSON(a)}},
		{name: "too many reads at once", holders: func(context.Context) ([]elector.Leader, error) { return []elector.Leader{a, b}, nil },
			busy: true, want: []any{asJSON(a)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, o := newTestServer(t, func(c *Config) { c.Holders = tc.holders })
			o.feed(t, a)
			for i := 0; tc.busy && i < maxStoreReads; i++ {
				if !s.tryRead() {
					t.Fatalf("store read %d of %d refused", i+1, maxStoreReads)
				}
			}
			w := do(t, s, "GET", "/leader", "192.0.2.1:5555", nil)
			m := decode(t, w)
			if w.Code != 200 || !reflect.DeepEqual(m["holders"], tc.want) || !reflect.DeepEqual(m["leader"], asJSON(a)) {
				t.Errorf("code %d, body %v; want 200, leader a, holders %v", w.Code, m, tc.want)
			}
		})
	}
}
