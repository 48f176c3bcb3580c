package store

import (
	"context"
	"crypto/x509"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/backend"
	"github.com/electd/electd/internal/testenv"
)

// kubeLike is a test-only backend shaped like the Kubernetes one:
// k8stest://[NAMESPACE], no hosts, its client's endpoint, CA and token from
// elsewhere than electd's flags. It is one package-level value and one
// registration (withBackend), as a real backend is; its Dial contacts
// nothing.
var kubeLike = backend.Backend{
	Name:            "kubelike",
	Schemes:         []backend.Scheme{{Name: "k8stest"}},
	Form:            "k8stest://[NAMESPACE]",
	About:           "a test store without hosts",
	CredentialsFrom: "the pod's service account or $KUBECONFIG",
	Parse:           parseKubeLike,
	Refused: func(err error) backend.Refusal {
		if strings.Contains(err.Error(), "Forbidden") {
			return backend.RefusedPermission
		}
		return backend.NotRefused
	},
	PermissionHint: "bind a Role with get, list, watch, create, update, patch on leases",
}

// parseKubeLike takes an optional namespace, a DNS label, and nothing else.
func parseKubeLike(u backend.URL) (backend.Target, error) {
	ns := u.Rest
	valid := len(ns) <= 63 && !strings.HasPrefix(ns, "-") && !strings.HasSuffix(ns, "-") &&
		strings.Trim(ns, "abcdefghijklmnopqrstuvwxyz0123456789-") == ""
	if !valid {
		return backend.Target{}, elector.Configf("store", "%s: k8stest://[NAMESPACE] takes a namespace (a DNS label) and nothing else: "+
			"no user, password, port or path", u.Redacted)
	}
	return backend.Target{Dial: func(_ context.Context, s backend.Settings) (backend.Conn, error) {
		return &kubeConn{ns: ns, set: s}, nil
	}}, nil
}

// kubeConn is kubeLike's connection: it answers Ping and makes no electors.
type kubeConn struct {
	ns  string
	set backend.Settings
}

func (c *kubeConn) NewElector(elector.Candidate) (elector.Locker, error) {
	return nil, errors.New("the test store makes no electors")
}
func (*kubeConn) Ping(context.Context) error { return nil }
func (*kubeConn) Close() error               { return nil }

// withBackend registers b until the test ends.
func withBackend(t *testing.T, b *backend.Backend) {
	t.Helper()
	old := backends
	backends = append(slices.Clip(old), b)
	t.Cleanup(func() { backends = old })
}

// TestHostlessBackend: a backend whose URL names no host fits the
// contract: its own Parse reads the URL, redaction and the unknown-scheme
// error cover it, the help shows its form, Open dials it with no TLS and
// no TLS diagnosis, and every TLS flag and password it cannot take is
// refused (exit 2) naming the flag and saying what to do instead. No
// network.
func TestHostlessBackend(t *testing.T) {
	withBackend(t, &kubeLike)
	t.Run("parse", func(t *testing.T) {
		for raw, want := range map[string]string{
			"k8stest://": "", "k8stest://team-a": "team-a", "K8STEST://team-a": "team-a",
			"k8stest://Team_A": "refused", "k8stest://ns:443": "refused", "k8stest://ns/x": "refused",
			"k8stest://u:s3cret@ns": "refused", "k8stest://ns?token=s3cret": "refused",
		} {
			su, err := parseStoreURL(raw)
			if want == "refused" {
				var ce *elector.ConfigError
				if !errors.As(err, &ce) || ce.Field != "store" || strings.Contains(err.Error(), "s3cret") {
					t.Errorf("parseStoreURL(%q) = %v, want a store error without the secret", raw, err)
				}
				continue
			}
			if err != nil || su.kind != "kubelike" || su.target.Hosts != nil || su.scheme.TLS {
				t.Fatalf("parseStoreURL(%q) = %+v, %v", raw, su, err)
			}
			conn, err := su.target.Dial(context.Background(), backend.Settings{})
			if err != nil || conn.(*kubeConn).ns != want {
				t.Errorf("%s dials namespace %q (%v), want %q", raw, conn.(*kubeConn).ns, err, want)
			}
		}
	})
	t.Run("redaction", func(t *testing.T) {
		for raw, want := range map[string]string{
			"k8stest://ns":              "k8stest://ns",
			"k8stest://u:s3cret@ns":     "k8stest://u:REDACTED@ns",
			"k8stest://ns?token=s3cret": "k8stest://ns?REDACTED",
		} {
			if got := redact(raw); got != want {
				t.Errorf("redact(%q) = %q, want %q", raw, got, want)
			}
		}
	})
	t.Run("registry", func(t *testing.T) {
		if _, err := parseStoreURL("nosuch://ns"); err == nil || !strings.Contains(err.Error(), "k8stest, redis") {
			t.Errorf("unknown scheme: %v; want k8stest among the schemes", err)
		}
		if h := URLHelp(); !strings.Contains(h, "k8stest://[NAMESPACE], a test store without hosts;") {
			t.Errorf("--store help %q does not show k8stest://[NAMESPACE]", h)
		}
	})
	t.Run("open", func(t *testing.T) {
		st, err := Open(context.Background(), Options{URL: "k8stest://team-a"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		c := st.conn.(*kubeConn)
		if c.ns != "team-a" || c.set.TLS != nil || c.set.Password != "" || c.set.Diagnose != nil || c.set.Logger == nil {
			t.Errorf("dialled %q with %+v: want no TLS, no password, no TLS diagnosis, a logger", c.ns, c.set)
		}
		if st.Redacted() != "k8stest://team-a" || st.Ping(context.Background()) != nil {
			t.Errorf("Redacted %q, Ping %v", st.Redacted(), st.Ping(context.Background()))
		}
		if _, err := st.NewElector(elector.Candidate{Election: "e", ID: "a"}); err == nil {
			t.Errorf("NewElector: want the test store's error")
		}
	})
	pw := testenv.WriteFile(t, "pw", "s3cret\n")
	ca := testenv.NewCA(t, "ca")
	for _, tc := range []struct {
		name   string
		opts   Options
		field  string
		reason []string
	}{
		{"CA", Options{CAFile: ca.CertFile}, "ca-file", []string{"service account or $KUBECONFIG", "drop --ca-file"}},
		{"client certificate", Options{CertFile: ca.CertFile}, "cert-file", []string{"drop --cert-file"}},
		{"client key", Options{KeyFile: ca.CertFile}, "key-file", []string{"drop --key-file"}},
		{"server name", Options{ServerName: "api"}, "tls-server-name", []string{"drop --tls-server-name"}},
		{"password from the environment", Options{Password: "s3cret"}, "$ELECTD_STORE_PASSWORD",
			[]string{"takes no password", "service account", "unset $ELECTD_STORE_PASSWORD"}},
		{"password file", Options{PasswordFile: pw}, "store-password-file", []string{"takes no password", "drop --store-password-file"}},
		{"sentinels' password", Options{Secrets: sentinel("s3cret", "")}, "$ELECTD_SENTINEL_PASSWORD",
			[]string{"Sentinels' own password", "use a redis+sentinel:// URL or drop it"}},
		{"sentinels' password file", Options{Secrets: sentinel("", pw)}, "sentinel-password-file", []string{"redis+sentinel://"}},
	} {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			tc.opts.URL = "k8stest://team-a"
			_, err := Open(context.Background(), tc.opts, nil)
			var ce *elector.ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field || strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("Open = %v, want a refusal of %s without the secret", err, tc.field)
			}
			for _, r := range tc.reason {
				if !strings.Contains(ce.Reason, r) {
					t.Errorf("the refusal %q does not say %q", ce.Reason, r)
				}
			}
		})
	}
	t.Run("refusals of the store", func(t *testing.T) {
		su, err := parseStoreURL("k8stest://team-a")
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			err    error
			reason string
		}{
			{x509.UnknownAuthorityError{}, "check the settings k8stest:// takes from the pod's service account"},
			{errors.New(`leases is Forbidden: User "x" cannot create`), "bind a Role"},
		} {
			var ce *elector.ConfigError
			if err := refusal(su, tc.err); !errors.As(err, &ce) || ce.Field != "store" || !strings.Contains(ce.Reason, tc.reason) {
				t.Errorf("refusal(%v) = %v, want a store error saying %q", tc.err, err, tc.reason)
			}
		}
	})
}
