package store

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/electd/electd/elector"
)

// Markers framing and splitting a fuzzed password: any of them in printed
// text means part of the password leaked.
var pwMarkers = []string{"Zx9Q", "Mk7R", "Qz8W"}

// FuzzStoreURLSecret builds scheme://user:password@hosts+tail from fuzzed
// parts, with a password framed by markers, and checks that neither redact
// nor parseStoreURL's errors and results show any of it, and that every
// refusal names the store flag. Run: go test -run '^$' -fuzz FuzzStoreURLSecret -fuzztime 30s ./store
func FuzzStoreURLSecret(f *testing.F) {
	for _, s := range [][5]string{
		{"redis", "u", "pw", "h:6379", "/0"},
		{"etcds", "root", "p/w", "h1:2379,h2:2379", ""},
		{"etcd", "", "x", "[::1]:2379", ""},
		{"redis", "u", "a@b", "h:6379", "?x=1"},
		{"rediss", "u:v", "p#w", "h", "/1#f"},
		{"redis", "u", "12", "h:6379", "/x@y"},
		{"zk", "u", "?", "h:1", ""},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4])
	}
	f.Fuzz(func(t *testing.T, scheme, user, pw, hosts, tail string) {
		for _, m := range pwMarkers {
			if strings.Contains(scheme+user+hosts+tail, m) {
				t.Skip("a marker outside the password")
			}
		}
		half := len(pw) / 2
		password := pwMarkers[0] + pw[:half] + pwMarkers[1] + pw[half:] + pwMarkers[2]
		raw := scheme + "://" + user + ":" + password + "@" + hosts + tail
		leaks := func(s string) bool {
			for _, m := range pwMarkers {
				if strings.Contains(s, m) {
					return true
				}
			}
			return false
		}
		if r := redact(raw); leaks(r) {
			t.Fatalf("redact(%q) = %q shows the password", raw, r)
		}
		su, err := parseStoreURL(raw)
		if err != nil {
			checkStoreRefusal(t, raw, err)
			if leaks(err.Error()) {
				t.Fatalf("parseStoreURL(%q) error shows the password: %v", raw, err)
			}
			return
		}
		if leaks(su.redacted) || leaks(su.user) || leaks(strings.Join(su.target.Hosts, ",")) {
			t.Fatalf("parseStoreURL(%q): the password shows in redacted %q, user %q or hosts %q", raw, su.redacted, su.user, su.target.Hosts)
		}
	})
}

// FuzzParseStoreURL feeds any string to parseStoreURL: no panic, every
// refusal names --store and a rule, an accepted URL is a registered
// backend's, its hosts (a store with hosts) have ports, and its redacted
// form does not show its password. Run: go test -run '^$' -fuzz FuzzParseStoreURL -fuzztime 30s ./store
func FuzzParseStoreURL(f *testing.F) {
	for _, s := range []string{
		"etcd://127.0.0.1:2379", "etcds://u:p@h1:2379,h2:2379", "redis://:pw@h:6379/15", "rediss://u:p%40ss@h:6380",
		"redis://h", "etcd://h:0", "etcd://,", "redis://u:p/w@h:1", "etcd://[::1]:2379,[fe80::1%25eth0]:2379",
		"redis://h:6379/-1", "%", "://", "etcd://@", "redis://u:p@@h:1", "etcd://h:2379?", "etcd://h:2379#",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		su, err := parseStoreURL(raw)
		if err != nil {
			checkStoreRefusal(t, raw, err)
			return
		}
		hosts := su.target.Hosts
		if su.target.AnswersPlain != nil && len(hosts) == 0 || (su.kind == "redis" && len(hosts) != 1) {
			t.Fatalf("parseStoreURL(%q): hosts %q", raw, hosts)
		}
		for _, h := range hosts {
			if !strings.Contains(h, ":") || strings.ContainsAny(h, ",@/") {
				t.Fatalf("parseStoreURL(%q): host %q", raw, h)
			}
		}
		if !slices.Contains(backends, su.backend) || su.kind != su.backend.Name || su.target.Dial == nil || su.redacted == "" {
			t.Fatalf("parseStoreURL(%q) = %+v", raw, su)
		}
		if p := su.password; len(p) >= 4 && strings.Count(raw, p) == 1 && strings.Contains(su.redacted, p) {
			t.Fatalf("parseStoreURL(%q): redacted %q shows the password %q", raw, su.redacted, p)
		}
	})
}

// checkStoreRefusal asserts that err is a *elector.ConfigError of the store
// flag with a reason.
func checkStoreRefusal(t *testing.T, raw string, err error) {
	t.Helper()
	var ce *elector.ConfigError
	if !errors.As(err, &ce) || ce.Field != "store" || ce.Reason == "" {
		t.Fatalf("parseStoreURL(%q) = %#v, want a *elector.ConfigError of field store with a reason", raw, err)
	}
}
