package store

import (
	"slices"
	"strings"
	"testing"
)

// TestRegistry: every backend of backends.go is whole (a name, schemes, a
// URL form under its first scheme, a Parse and a Refused), no scheme or
// secret is listed twice, and the help names every backend's URL form.
func TestRegistry(t *testing.T) {
	seen := map[string]string{}
	secrets := map[string]bool{}
	help := URLHelp()
	for _, b := range backends {
		if b.Name == "" || len(b.Schemes) == 0 || b.Parse == nil || b.Refused == nil {
			t.Errorf("backend %q: a name, schemes, Parse and Refused are required", b.Name)
			continue
		}
		if !strings.HasPrefix(b.Form, b.Schemes[0].Name+"://") {
			t.Errorf("backend %s: its form %q is not a URL of its first scheme %s", b.Name, b.Form, b.Schemes[0].Name)
		}
		if !strings.Contains(help, b.Form) {
			t.Errorf("the --store help does not show %s: %s", b.Form, help)
		}
		for _, s := range b.Schemes {
			if !validScheme(s.Name) || s.Name != strings.ToLower(s.Name) {
				t.Errorf("backend %s: %q is not a lower-case URL scheme", b.Name, s.Name)
			}
			if other, dup := seen[s.Name]; dup {
				t.Errorf("scheme %s is both %s's and %s's", s.Name, other, b.Name)
			}
			seen[s.Name] = b.Name
		}
		for _, sec := range b.Secrets {
			if sec.Name == storePassword.Name || sec.Name == "" || sec.About == "" {
				t.Errorf("backend %s: secret %+v needs a name of its own and what it is", b.Name, sec)
			}
			secrets[sec.Name] = true
		}
	}
	var flags []string
	for _, f := range SecretFlags() {
		flags = append(flags, f.Flag)
		if !secrets[f.Name] || f.Env != "ELECTD_"+strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_")) {
			t.Errorf("secret flag %+v: not a backend's secret, or its variable is not named after it", f)
		}
	}
	if !slices.Contains(flags, "sentinel-password-file") {
		t.Errorf("the secret flags %v lack --sentinel-password-file", flags)
	}
}
