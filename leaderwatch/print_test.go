package leaderwatch

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/elector"
)

func TestEscapeText(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{name: "plain", in: "node-1 http://h:80/ü", want: "node-1 http://h:80/ü"},
		{name: "controls", in: "a\x1b[31m\x07\r\n\t\x7f", want: `a\x1b[31m\a\r\n\t\x7f`},
		{name: "format characters", in: "a\u202eb\u200bc\ufeff", want: `a\u202eb\u200bc\ufeff`},
		{name: "C1 control", in: "a\u009bb", want: `a\u009bb`},
		{name: "invalid UTF-8", in: "a\xffb\uFFFD", want: `a\xffb` + "\uFFFD"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := EscapeText(tc.in); got != tc.want {
				t.Fatalf("EscapeText(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestPrintEscapesStoreText: a leader whose id and address hold control
// characters prints as one line, escaped; JSON keeps them as JSON does.
func TestPrintEscapesStoreText(t *testing.T) {
	l := elector.Leader{ID: "x\x1b[2K\r\nz", Token: 7, Since: time.Unix(0, 0)}
	for _, tc := range []struct {
		name string
		json bool
		want string
	}{
		{name: "text", want: `e: x\x1b[2K\r\nz token=7 address=- since=1970-01-01T00:00:00Z` + "\n"},
		{name: "json", json: true, want: `"id":"x\u001b[2K\r\nz"`},
		{name: "none", want: "e: no leader\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			show := l
			if tc.name == "none" {
				show = elector.Leader{}
			}
			if err := (Printer{Election: "e", JSON: tc.json, W: &b}).Print(show); err != nil {
				t.Fatal(err)
			}
			if strings.Count(b.String(), "\n") != 1 || !strings.Contains(b.String(), tc.want) {
				t.Fatalf("printed %q, want one line with %q", b.String(), tc.want)
			}
		})
	}
}

// TestPrintHolders: every holder of a semaphore is printed, one line
// each in text, and as "holders" in JSON; the leader alone when none are
// given, and none for "no leader".
func TestPrintHolders(t *testing.T) {
	a := elector.Leader{ID: "a", Token: 3, Since: time.Unix(0, 0).UTC()}
	b := elector.Leader{ID: "b", Address: "http://b", Token: 5, Since: time.Unix(0, 0).UTC()}
	tests := []struct {
		name    string
		json    bool
		l       elector.Leader
		holders []elector.Leader
		want    string
	}{
		{name: "text, two holders", l: a, holders: []elector.Leader{a, b},
			want: "e: a token=3 address=- since=1970-01-01T00:00:00Z\ne: b token=5 address=http://b since=1970-01-01T00:00:00Z\n"},
		{name: "text, leader alone", l: a, want: "e: a token=3 address=- since=1970-01-01T00:00:00Z\n"},
		{name: "json, two holders", json: true, l: a, holders: []elector.Leader{a, b},
			want: `{"election":"e","leader":{"id":"a","fencing_token":3,"since":"1970-01-01T00:00:00Z"},"holders":[{"id":"a","fencing_token":3,"since":"1970-01-01T00:00:00Z"},{"id":"b","address":"http://b","fencing_token":5,"since":"1970-01-01T00:00:00Z"}]}` + "\n"},
		{name: "json, none", json: true, want: `{"election":"e","leader":null,"holders":[]}` + "\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := (Printer{Election: "e", JSON: tc.json, W: &b}).PrintHolders(tc.l, tc.holders); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Fatalf("printed\n%s\nwant\n%s", b.String(), tc.want)
			}
		})
	}
}
