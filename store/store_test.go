package store

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/internal/testenv"
)

func TestParseStoreURL(t *testing.T) {
	tests := []struct {
		name, raw string
		kind      string // "" = refused
		tls       bool
		hosts     []string
		user, pw  string
		redacted  string
		reason    string // part of the refusal
	}{
		{name: "etcd one host", raw: "etcd://h1:2379", kind: "etcd", hosts: []string{"h1:2379"}, redacted: "etcd://h1:2379"},
		{name: "etcd cluster", raw: "etcd://h1:2379,h2:2379,[::1]:2379", kind: "etcd", hosts: []string{"h1:2379", "h2:2379", "[::1]:2379"}, redacted: "etcd://h1:2379,h2:2379,[::1]:2379"},
		{name: "etcds with user", raw: "etcds://u:p%2Fw@h:2379", kind: "etcd", tls: true, hosts: []string{"h:2379"}, user: "u", pw: "p/w", redacted: "etcds://u:REDACTED@h:2379"},
		{name: "redis db", raw: "redis://h:6379/3", kind: "redis", hosts: []string{"h:6379"}, redacted: "redis://h:6379/3"},
		{name: "rediss password only", raw: "rediss://:pw@h:6380", kind: "redis", tls: true, hosts: []string{"h:6380"}, pw: "pw", redacted: "rediss://:REDACTED@h:6380"},
		{name: "empty password is none", raw: "redis://u:@h:6379", kind: "redis", hosts: []string{"h:6379"}, user: "u", redacted: "redis://u:REDACTED@h:6379"},
		{name: "sentinel", raw: "redis+sentinel://u:pw@s1:26379,s2:26379/mymaster", kind: "redis sentinel", hosts: []string{"s1:26379", "s2:26379"}, user: "u", pw: "pw", redacted: "redis+sentinel://u:REDACTED@s1:26379,s2:26379/mymaster"},
		{name: "sentinel db tls", raw: "rediss+sentinel://s1:26379/mymaster/2", kind: "redis sentinel", tls: true, hosts: []string{"s1:26379"}, redacted: "rediss+sentinel://s1:26379/mymaster/2"},
		{name: "cluster", raw: "redis+cluster://h1:6379,h2:6379,h3:6379", kind: "redis cluster", hosts: []string{"h1:6379", "h2:6379", "h3:6379"}, redacted: "redis+cluster://h1:6379,h2:6379,h3:6379"},
		{name: "cluster tls", raw: "rediss+cluster://u:pw@h1:6379", kind: "redis cluster", tls: true, hosts: []string{"h1:6379"}, user: "u", pw: "pw", redacted: "rediss+cluster://u:REDACTED@h1:6379"},
		{name: "sentinel without master", raw: "redis+sentinel://s1:26379", reason: "needs the master's name"},
		{name: "sentinel bad db", raw: "redis+sentinel://s1:26379/m/x", reason: "not a number"},
		{name: "sentinel extra path", raw: "redis+sentinel://s1:26379/m/1/2", reason: "MASTER[/db]"},
		{name: "cluster with db", raw: "redis+cluster://h1:6379/1", reason: "only database 0"},
		{name: "not a URL", raw: "h:2379", reason: "is not a URL"},
		{name: "unknown scheme", raw: "mongodb://h:27017", reason: "scheme \"mongodb\""},
		{name: "no port", raw: "etcd://h1", reason: "needs a port"},
		{name: "bad port", raw: "etcd://h1:99999", reason: "1..65535"},
		{name: "empty host in list", raw: "etcd://h1:2379,,h2:2379", reason: "empty host"},
		{name: "etcd path", raw: "etcd://h:2379/x", reason: "no path"},
		{name: "two redis hosts", raw: "redis://a:1,b:2", reason: "one host"},
		{name: "redis db not a number", raw: "redis://h:6379/x", reason: "not a number"},
		{name: "query", raw: "redis://h:6379?password=pw", reason: "no query"},
		{name: "fragment", raw: "redis://h:6379#x", reason: "no query"},
		{name: "unescaped slash in password", raw: "redis://u:12/x@h:6379", reason: "stray '@'"},
		{name: "unescaped hash in password", raw: "redis://u:p#w@h:6379", reason: "percent-encode"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			su, err := parseStoreURL(tc.raw)
			if tc.kind == "" {
				var ce *elector.ConfigError
				if !errors.As(err, &ce) || ce.Field != "store" || !strings.Contains(ce.Reason, tc.reason) {
					t.Fatalf("parseStoreURL(%q) = %v, want a store error containing %q", tc.raw, err, tc.reason)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseStoreURL(%q): %v", tc.raw, err)
			}
			got := []any{su.kind, su.scheme.TLS, strings.Join(su.target.Hosts, " "), su.user, su.password, su.redacted}
			want := []any{tc.kind, tc.tls, strings.Join(tc.hosts, " "), tc.user, tc.pw, tc.redacted}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("parseStoreURL(%q) = %v, want %v", tc.raw, got, want)
				}
			}
		})
	}
}

func TestRedact(t *testing.T) {
	tests := []struct{ raw, want string }{
		{"etcd://h:2379", "etcd://h:2379"},
		{"redis://u:secret@h:6379/0", "redis://u:REDACTED@h:6379/0"},
		{"redis://u@h:6379", "redis://u@h:6379"},
		{"redis://u:se/cret@h:6379", "redis://REDACTED@h:6379"},
		{"redis://u:12/se@cret@h:6379", "redis://REDACTED@h:6379"},
		{"redis://u:s#e@h:6379", "redis://REDACTED@h:6379"},
		{"u:secret@h:6379", "REDACTED@h:6379"},
		{"redis://h:6379?password=secret", "redis://h:6379?REDACTED"},
		{"redis://h:6379#secret", "redis://h:6379#REDACTED"},
		{"%zz://u:secret@h", "%zz://REDACTED@h"},
		{"etcds://u:secret@h1:2379,[::1]:2379", "etcds://u:REDACTED@h1:2379,[::1]:2379"},
		{"k8s://", "k8s://"},
		{"k8s://team-a", "k8s://team-a"},
		{"k8s://?token=secret", "k8s://?REDACTED"},
	}
	for _, tc := range tests {
		t.Run(tc.raw, func(t *testing.T) {
			if got := redact(tc.raw); got != tc.want {
				t.Fatalf("redact(%q) = %q, want %q", tc.raw, got, tc.want)
			}
		})
	}
}

func TestStorePassword(t *testing.T) {
	pw := testenv.WriteFile(t, "pw", "from-file\r\n")
	empty := testenv.WriteFile(t, "empty", "\n")
	tests := []struct {
		name     string
		opts     Options
		want     string // password; "" with field set = refused
		from     string
		sentinel string // the sentinels' password
		field    string
	}{
		{name: "url", opts: Options{URL: "redis://u:p@h:1"}, want: "p", from: "store"},
		{name: "env", opts: Options{URL: "redis://u@h:1", Password: "e"}, want: "e", from: "$ELECTD_STORE_PASSWORD"},
		{name: "file", opts: Options{URL: "etcd://u@h:1", PasswordFile: pw}, want: "from-file", from: "store-password-file"},
		{name: "redis default user", opts: Options{URL: "redis://h:1", Password: "e"}, want: "e", from: "$ELECTD_STORE_PASSWORD"},
		{name: "none", opts: Options{URL: "redis://h:1"}},
		{name: "url and file", opts: Options{URL: "redis://u:p@h:1", PasswordFile: pw}, field: "store-password-file"},
		{name: "file and env", opts: Options{URL: "redis://u@h:1", PasswordFile: pw, Password: "e"}, field: "$ELECTD_STORE_PASSWORD"},
		{name: "empty file", opts: Options{URL: "redis://u@h:1", PasswordFile: empty}, field: "store-password-file"},
		{name: "missing file", opts: Options{URL: "redis://u@h:1", PasswordFile: pw + ".nope"}, field: "store-password-file"},
		{name: "user without password", opts: Options{URL: "redis://u@h:1"}, field: "store"},
		{name: "etcd password without user", opts: Options{URL: "etcd://h:1", Password: "e"}, field: "$ELECTD_STORE_PASSWORD"},
		{name: "sentinel password from env", opts: Options{URL: "redis+sentinel://h:1/m", Secrets: sentinel("s", "")}, sentinel: "s"},
		{name: "sentinel password from file", opts: Options{URL: "redis+sentinel://u:p@h:1/m", Secrets: sentinel("", pw)}, want: "p", from: "store", sentinel: "from-file"},
		{name: "sentinel password twice", opts: Options{URL: "redis+sentinel://h:1/m", Secrets: sentinel("s", pw)}, field: "$ELECTD_SENTINEL_PASSWORD"},
		{name: "sentinel password empty file", opts: Options{URL: "redis+sentinel://h:1/m", Secrets: sentinel("", empty)}, field: "sentinel-password-file"},
		{name: "sentinel password without sentinels", opts: Options{URL: "redis://h:1", Secrets: sentinel("s", "")}, field: "$ELECTD_SENTINEL_PASSWORD"},
		{name: "sentinel password file for a cluster", opts: Options{URL: "redis+cluster://h:1", Secrets: sentinel("", pw)}, field: "sentinel-password-file"},
		{name: "a secret no store takes", opts: Options{URL: "redis://h:1", Secrets: map[string]SecretInput{"nosuch": {Value: "x"}}}, field: "nosuch-file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			{
				su, err := parseStoreURL(tc.opts.URL)
				if err != nil {
					t.Fatal(err)
				}
				err = su.setPassword(tc.opts)
				if tc.field != "" {
					var ce *elector.ConfigError
					if !errors.As(err, &ce) || ce.Field != tc.field {
						t.Fatalf("storePassword = %v, want a refusal of %s", err, tc.field)
					}
					if strings.Contains(err.Error(), "from-file") || strings.Contains(err.Error(), ":p@") {
						t.Fatalf("the refusal shows the password: %v", err)
					}
					return
				}
				if got := su.own["sentinel-password"]; err != nil || su.password != tc.want || su.passwordFrom != tc.from || got != tc.sentinel {
					t.Fatalf("storePassword = %v, password %q from %q, sentinels' %q; want %q from %q, sentinels' %q",
						err, su.password, su.passwordFrom, got, tc.want, tc.from, tc.sentinel)
				}
				if tc.sentinel != "" && !su.secrets.leaks("x"+tc.sentinel+"x") {
					t.Errorf("the sentinels' password is not among the secrets to hide")
				}
			}
		})
	}
}

// sentinel is Options.Secrets with the sentinels' password from the
// environment (value) or a file.
func sentinel(value, file string) map[string]SecretInput {
	return map[string]SecretInput{"sentinel-password": {Value: value, File: file}}
}

func TestStoreTLSFlags(t *testing.T) {
	ca := testenv.NewCA(t, "ca")
	kp := ca.Client(t, "c")
	tests := []struct {
		name  string
		opts  Options
		field string // "" = accepted
		certs int
	}{
		{name: "plain", opts: Options{URL: "etcd://h:1"}},
		{name: "tls, system roots", opts: Options{URL: "etcds://h:1"}},
		{name: "tls, CA and certificate", opts: Options{URL: "rediss://h:1", CAFile: ca.CertFile, CertFile: kp.CertFile, KeyFile: kp.KeyFile}, certs: 1},
		{name: "CA with a plain URL", opts: Options{URL: "redis://h:1", CAFile: ca.CertFile}, field: "ca-file"},
		{name: "server name with a plain URL", opts: Options{URL: "redis://h:1", ServerName: "x"}, field: "tls-server-name"},
		{name: "missing CA", opts: Options{URL: "etcds://h:1", CAFile: ca.CertFile + ".nope"}, field: "ca-file"},
		{name: "CA not PEM", opts: Options{URL: "etcds://h:1", CAFile: kp.KeyFile}, field: "ca-file"},
		{name: "key without certificate", opts: Options{URL: "etcds://h:1", KeyFile: kp.KeyFile}, field: "cert-file"},
		{name: "mismatched pair", opts: Options{URL: "etcds://h:1", CertFile: kp.CertFile, KeyFile: kp.CertFile}, field: "cert-file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			{
				su, err := parseStoreURL(tc.opts.URL)
				if err != nil {
					t.Fatal(err)
				}
				cfg, err := tlsConfig(tc.opts, su)
				if tc.field != "" {
					var ce *elector.ConfigError
					if !errors.As(err, &ce) || ce.Field != tc.field {
						t.Fatalf("storeTLS = %v, want a refusal of %s", err, tc.field)
					}
					return
				}
				if err != nil || (cfg != nil) != su.scheme.TLS || (cfg != nil && len(cfg.Certificates) != tc.certs) {
					t.Fatalf("storeTLS = %v, %v", cfg, err)
				}
			}
		})
	}
}

func TestScrubbedLogger(t *testing.T) {
	var buf bytes.Buffer
	ss := newSecrets("s3cr/et")
	log := ss.logger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	log = log.With("url", "redis://u:s3cr%2Fet@h").WithGroup("g")
	log.Debug("saw s3cr/et", "err", errors.New("auth s3cr/et failed"), "n", 1,
		slog.Group("sub", "v", "x s3cr/et"), "any", []string{"s3cr/et"})
	out := buf.String()
	if ss.leaks(out) || strings.Contains(out, "s3cr") {
		t.Fatalf("secret in log: %s", out)
	}
	for _, want := range []string{`"n":1`, `"msg":"saw REDACTED"`, "REDACTED@h"} {
		if !strings.Contains(out, want) {
			t.Errorf("log %s lacks %s", out, want)
		}
	}
	err := ss.err(&elector.ConfigError{Field: "store", Reason: "bad s3cr/et"})
	var ce *elector.ConfigError
	if !errors.As(err, &ce) || strings.Contains(err.Error(), "s3cr") {
		t.Fatalf("scrubbed error %v: want no secret and the ConfigError kept", err)
	}
}
