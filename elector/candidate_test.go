package elector

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

func TestCandidateValidate(t *testing.T) {
	ok := Candidate{Election: "jobs", ID: "host-1", Address: "http://host-1:8080", Timing: Timing{TTL: 2 * time.Second}}
	tests := []struct {
		name  string
		mod   func(*Candidate)
		field string // "" = accepted
	}{
		{name: "valid", mod: func(*Candidate) {}},
		{name: "empty election", mod: func(c *Candidate) { c.Election = "" }, field: "election"},
		{name: "braces", mod: func(c *Candidate) { c.Election = "a{b}" }, field: "election"},
		{name: "slash", mod: func(c *Candidate) { c.Election = "a/b" }, field: "election"},
		{name: "dot dot", mod: func(c *Candidate) { c.Election = ".." }, field: "election"},
		{name: "space", mod: func(c *Candidate) { c.Election = "a b" }, field: "election"},
		{name: "control", mod: func(c *Candidate) { c.Election = "a\x01" }, field: "election"},
		{name: "replacement character", mod: func(c *Candidate) { c.Election = "a\ufffd" }, field: "election"},
		{name: "invalid utf-8", mod: func(c *Candidate) { c.Election = "a\xff" }, field: "election"},
		{name: "too long", mod: func(c *Candidate) { c.Election = strings.Repeat("é", 65) }, field: "election"},
		{name: "longest", mod: func(c *Candidate) { c.Election = strings.Repeat("x", MaxNameLen) }},
		{name: "empty id", mod: func(c *Candidate) { c.ID = "" }, field: "id"},
		{name: "id newline", mod: func(c *Candidate) { c.ID = "h\n" }, field: "id"},
		{name: "address control", mod: func(c *Candidate) { c.Address = "http://x\n" }, field: "advertise"},
		{name: "address too long", mod: func(c *Candidate) { c.Address = strings.Repeat("x", MaxAddressLen+1) }, field: "advertise"},
		{name: "slots", mod: func(c *Candidate) { c.Slots = MaxSlots + 1 }, field: "slots"},
		{name: "negative slots", mod: func(c *Candidate) { c.Slots = -1 }, field: "slots"},
		{name: "ttl", mod: func(c *Candidate) { c.Timing.TTL = 50 * time.Millisecond }, field: "ttl"},
		{name: "renew interval", mod: func(c *Candidate) { c.Timing.RenewInterval = time.Second }, field: "renew-interval"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.mod(&c)
			got, err := c.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				if got.Slots != 1 || got.Clock == nil || got.Logger == nil || got.Instrument == nil || got.Timing.RenewInterval == 0 {
					t.Fatalf("defaults not filled in: %+v", got)
				}
				return
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field || ce.Reason == "" {
				t.Fatalf("Validate = %v, want a ConfigError for %q", err, tc.field)
			}
		})
	}
}

// FuzzNames gives election names and candidate ids to Candidate.Validate.
// Every refusal must be a *ConfigError naming the field; an accepted name
// must stay inside its place in every store's keys: etcd keys are
// /electd/elections/NAME/…, so no '/' (and not "." or ".."); Redis keys are
// electd:{NAME}:…, so no braces, which would end the hash tag early. Empty,
// overlong, whitespace, control and invalid UTF-8 names are refused.
// Run: go test -run '^$' -fuzz FuzzNames -fuzztime 30s ./elector
func FuzzNames(f *testing.F) {
	for _, s := range []string{
		"nightly-reports", "a", ".", "..", "a/b", "../x", "{x}", "a}:b", "a b", "a\tb", "a\x00b", "é", "\xff",
		"api:primary", strings.Repeat("x", 128), strings.Repeat("x", 129), strings.Repeat("é", 65), "\u00a0", "\u2028", "\ufeff",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		for _, field := range []string{"election", "id"} {
			c := Candidate{Election: "e", ID: "i"}
			if field == "election" {
				c.Election = name
			} else {
				c.ID = name
			}
			_, err := c.Validate()
			if err != nil {
				var ce *ConfigError
				if !errors.As(err, &ce) || ce.Field != field || ce.Reason == "" {
					t.Fatalf("%s %q refused with %#v; want a *ConfigError of field %s with a reason", field, name, err, field)
				}
				continue
			}
			if strings.ContainsAny(name, "/{}") || name == "." || name == ".." {
				t.Fatalf("%s %q accepted: it leaves its key prefix or hash tag", field, name)
			}
			if name == "" || len(name) > MaxNameLen || !utf8.ValidString(name) {
				t.Fatalf("%s %q accepted: empty, overlong or invalid UTF-8", field, name)
			}
			for _, r := range name {
				if unicode.IsSpace(r) || unicode.IsControl(r) {
					t.Fatalf("%s %q accepted: has whitespace or a control character", field, name)
				}
			}
		}
	})
}
