package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/internal/testenv"
)

// TestLeaderEscapesStoreText: `electd leader` prints text that someone
// with write access to the store wrote (a candidate key of another tool)
// with its control characters escaped, so that it cannot forge lines or
// drive the terminal.
func TestLeaderEscapesStoreText(t *testing.T) {
	e := testenv.StartEtcd(t)
	forged := "x\x1b[2K\r\x07z: real-leader token=999 address=http://attacker\n\u202ez"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.Client(t).Put(ctx, "/electd/elections/forge/1", forged); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, format string
		want         string
	}{
		{name: "text", format: "text", want: `forge: x\x1b[2K\r\az: real-leader token=999 address=http://attacker\n\u202ez token=`},
		{name: "json", format: "json", want: `"id":"x\u001b[2K\r\u0007z: real-leader token=999 address=http://attacker\n` + "\u202e" + `z"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runElectd(t, 30*time.Second, nil, "leader", "--store", e.URL(), "--election", "forge", "-o", tc.format)
			if r.code != 0 {
				t.Fatalf("want exit 0:\n%s", r)
			}
			if strings.Count(r.stdout, "\n") != 1 || strings.ContainsAny(strings.TrimSuffix(r.stdout, "\n"), "\x1b\x07\r\n") {
				t.Fatalf("control characters printed raw: %q", r.stdout)
			}
			if !strings.Contains(r.stdout, tc.want) {
				t.Fatalf("stdout %q does not contain %q", r.stdout, tc.want)
			}
		})
	}
}

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
			if got := escapeText(tc.in); got != tc.want {
				t.Fatalf("escapeText(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
