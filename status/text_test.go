package status

import (
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/elector"
)

// TestWriteText: the table lists every candidate in order, holders
// flagged, with "-" for what the store does not say; store text is
// escaped, so an id cannot forge a line; an unreachable store is said so
// and nothing else is shown.
func TestWriteText(t *testing.T) {
	at := time.Date(2026, 12, 6, 23, 0, 0, 0, time.UTC)
	line := []elector.Queued{
		{ID: "a", Address: "http://a", Holder: true, Token: 7, Since: at.Add(-time.Minute), Expires: at.Add(2 * time.Second)},
		{ID: "b\n  3  forged  holder", Order: 9},
	}
	tests := []struct {
		name    string
		rep     Report
		want    []string
		notWant []string
	}{
		{name: "line", rep: Report{Election: "e", At: at, Slots: 1, Store: Store{URL: "etcd://h:2379", Reachable: true}, Queue: line,
			Holders: []Held{{ID: "a", FencingToken: 7, Since: at.Add(-time.Minute), AgeSeconds: 60}}},
			want: []string{"store etcd://h:2379 (reachable)", "term      a token=7 since 2026-12-06T22:59:00Z (age 1m0s)",
				"  1  a ", "holder   7", "in 2s", `  2  b\n  3  forged  holder  waiting  -`, "last run  none"},
			notWant: []string{"\n  3  forged"}},
		{name: "nobody holds", rep: Report{Election: "e", At: at, Slots: 1, Store: Store{URL: "u", Reachable: true}, Queue: line[1:]},
			want: []string{"term      none: nobody holds", "queue     1 candidate(s)"}},
		{name: "unreachable", rep: Report{Election: "e", Store: Store{URL: "redis://h:6379", Error: "connection refused"}},
			want: []string{"store redis://h:6379 (NOT reachable: connection refused)"}, notWant: []string{"term", "queue"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := tc.rep.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, b.String())
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(b.String(), w) {
					t.Errorf("output has %q:\n%s", w, b.String())
				}
			}
		})
	}
}
