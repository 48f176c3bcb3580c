package electortest

import (
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/elector"
)

func TestCheckObserved(t *testing.T) {
	since := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	none := elector.Leader{}
	lead := func(id string, token uint64) elector.Leader {
		return elector.Leader{ID: id, Address: "http://" + id + ".test:4040", Token: token, Since: since}
	}
	a, b := lead("a", 650), lead("b", 779)
	aRefined := a
	aRefined.Since = since.Add(time.Millisecond)
	terms := []elector.Leader{a, b}
	tests := []struct {
		name string
		seen []elector.Leader
		err  string // "" for a match; else a part of the error
	}{
		{"hand-over", []elector.Leader{none, a, b, none}, ""},
		{"since refined", []elector.Leader{none, a, aRefined, b, b, none}, ""},
		{"none between", []elector.Leader{none, a, none, b, none}, ""},
		// Redlock under load (CI's failure and its reproductions): b saw the
		// hand-over token 651 on a minority, withdrew it, and committed 779
		// over it once a majority held it with 651.
		{"hand-over token withdrawn", []elector.Leader{none, a, lead("b", 651), b, none}, ""},
		{"none, hand-over token, term", []elector.Leader{none, a, none, lead("b", 651), b, none}, ""},
		{"hand-over token, none, term", []elector.Leader{none, a, lead("b", 651), none, b, none}, ""},
		{"hand-over token, none, again, term", []elector.Leader{none, a, lead("b", 651), none, lead("b", 651), b, none}, ""},
		// Redlock under load: b's leave landed on one server, and an
		// observer got that server's message before another's naming b.
		{"b's term, none, again", []elector.Leader{none, a, none, b, none, b, none}, ""},
		{"a's term, none, again", []elector.Leader{none, a, none, a, b, none, b, none}, ""},
		{"grant before the first term", []elector.Leader{none, lead("a", 600), a, lead("b", 651), b, none}, ""},

		{"nothing", nil, "first value"},
		{"a leader first", []elector.Leader{a, b, none}, "first value"},
		{"b's term missed", []elector.Leader{none, a, none}, "b's term with token 779 not seen"},
		{"b's term missed, its grant seen", []elector.Leader{none, a, lead("b", 651), none}, "b's term with token 779 not seen"},
		{"no none at the end", []elector.Leader{none, a, b}, "last value"},
		{"a again after b", []elector.Leader{none, a, b, a, none}, "tokens only grow"},
		{"a again after b and none", []elector.Leader{none, a, b, none, a, none}, "tokens only grow"},
		{"a grant after its term", []elector.Leader{none, a, lead("b", 651), b, lead("b", 651), none}, "tokens only grow"},
		{"a's token for b", []elector.Leader{none, a, lead("b", 650), b, none}, "tokens only grow"},
		{"b before a", []elector.Leader{none, lead("b", 600), a, b, none}, "where the next term is a's"},
		{"a stranger", []elector.Leader{none, a, lead("c", 700), b, none}, "where the next term is b's"},
		{"b above its term first", []elector.Leader{none, a, lead("b", 800), b, none}, "where the next term is b's"},
		{"a leader after the last term", []elector.Leader{none, a, b, lead("c", 800), none}, "after the last term"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkObserved(tt.seen, terms)
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("checkObserved(%v) = %v, want a match", tt.seen, err)
			case tt.err != "" && err == nil:
				t.Fatalf("checkObserved(%v) matched, want an error containing %q", tt.seen, tt.err)
			case tt.err != "" && !strings.Contains(err.Error(), tt.err):
				t.Fatalf("checkObserved(%v) = %v, want an error containing %q", tt.seen, err, tt.err)
			}
		})
	}
}
