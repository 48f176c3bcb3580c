package main

import (
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	goredis "github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
	etcdel "github.com/electd/electd/elector/etcd"
	redisel "github.com/electd/electd/elector/redis"
)

// FuzzNames gives election names and candidate ids to both backends. Every
// refusal must be a *elector.ConfigError naming the field; an accepted name
// must stay inside its key namespace: etcd keys are
// /electd/elections/NAME/…, so no '/' (and not "." or ".."); Redis keys are
// electd:{NAME}:…, so no braces, which would end the hash tag early. Both
// refuse empty, overlong, whitespace, control and invalid UTF-8 names.
// Run: go test -run '^$' -fuzz FuzzNames -fuzztime 30s ./cmd/electd
func FuzzNames(f *testing.F) {
	for _, s := range []string{
		"nightly-reports", "a", ".", "..", "a/b", "../x", "{x}", "a}:b", "a b", "a\tb", "a\x00b", "é", "\xff",
		"api:primary", strings.Repeat("x", 128), strings.Repeat("x", 129), strings.Repeat("é", 65), "\u00a0", "\u2028", "\ufeff",
	} {
		f.Add(s)
	}
	cli := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"}) // never contacted
	f.Cleanup(func() { _ = cli.Close() })
	f.Fuzz(func(t *testing.T, name string) {
		for _, field := range []string{"election", "id"} {
			etcdErr := etcdel.ValidateName(field, name)
			checkNameRefusal(t, "etcd", field, name, etcdErr)
			if etcdErr == nil && (strings.Contains(name, "/") || name == "." || name == "..") {
				t.Fatalf("etcd accepts %s %q, which leaves its key prefix", field, name)
			}

			cfg := redisel.Config{Client: cli, Election: "e", ID: "i"}
			if field == "election" {
				cfg.Election = name
			} else {
				cfg.ID = name
			}
			el, redisErr := redisel.New(cfg)
			if el != nil {
				_ = el.Close()
			}
			checkNameRefusal(t, "redis", field, name, redisErr)
			if redisErr == nil && strings.ContainsAny(name, "{}") {
				t.Fatalf("redis accepts %s %q, which breaks out of the {NAME} hash tag", field, name)
			}

			if etcdErr == nil || redisErr == nil {
				if name == "" || len(name) > 128 || !utf8.ValidString(name) {
					t.Fatalf("%s %q accepted (etcd: %v, redis: %v): empty, overlong or invalid UTF-8", field, name, etcdErr, redisErr)
				}
				for _, r := range name {
					if unicode.IsSpace(r) || unicode.IsControl(r) {
						t.Fatalf("%s %q accepted (etcd: %v, redis: %v): has whitespace or a control character", field, name, etcdErr, redisErr)
					}
				}
			}
		}
	})
}

func checkNameRefusal(t *testing.T, backend, field, name string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var ce *elector.ConfigError
	if !errors.As(err, &ce) || ce.Field != field || ce.Reason == "" {
		t.Fatalf("%s refuses %s %q with %#v; want a *elector.ConfigError of field %s with a reason", backend, field, name, err, field)
	}
}
