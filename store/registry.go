package store

import (
	"slices"
	"sort"
	"strings"

	"github.com/electd/electd/elector/backend"
)

// What the CLI and the messages know of the backends, made from the one
// list in backends.go.

// backendFor finds the backend of a scheme.
func backendFor(scheme string) (*backend.Backend, backend.Scheme) {
	for _, b := range backends {
		if s, ok := b.Scheme(scheme); ok {
			return b, s
		}
	}
	return nil, backend.Scheme{}
}

// schemes lists every scheme, for messages.
func schemes() string {
	var all []string
	for _, b := range backends {
		for _, s := range b.Schemes {
			all = append(all, s.Name)
		}
	}
	sort.Strings(all)
	return strings.Join(all, ", ")
}

// tlsSchemes lists the TLS schemes, for messages.
func tlsSchemes() string {
	var all []string
	for _, b := range backends {
		for _, s := range b.Schemes {
			if s.TLS {
				all = append(all, s.Name+"://")
			}
		}
	}
	sort.Strings(all)
	return strings.Join(all, ", ")
}

// counterpart is b's scheme of the other kind than s (TLS for a plain
// one, plain for TLS), or "" when it has none.
func counterpart(b *backend.Backend, s backend.Scheme) string {
	for _, o := range b.Schemes {
		if o.TLS != s.TLS {
			return o.Name
		}
	}
	return ""
}

// takesTLS reports whether b has a TLS scheme (and so takes electd's TLS
// flags with it).
func takesTLS(b *backend.Backend) bool {
	return slices.ContainsFunc(b.Schemes, func(s backend.Scheme) bool { return s.TLS })
}

// URLHelp is the help of the --store flag: every registered backend's URL,
// with its TLS scheme.
func URLHelp() string {
	var forms []string
	for _, b := range backends {
		f := b.Form
		if b.About != "" {
			f += ", " + b.About
		}
		var tls []string
		for _, s := range b.Schemes {
			if s.TLS {
				tls = append(tls, s.Name+"://")
			}
		}
		if len(tls) > 0 {
			f += " (" + strings.Join(tls, ", ") + " for TLS)"
		}
		forms = append(forms, f)
	}
	return "store URL, one of: " + strings.Join(forms, "; ") +
		"; prefer a password file or $ELECTD_STORE_PASSWORD to a password in the URL"
}

// storePassword is the store password's variable and file flag: the one
// secret every backend with Password takes.
var storePassword = backend.Secret{Name: "store-password", About: "the store password"}

// SecretFlag is a backend's own secret as the CLI offers it: a file flag,
// and a variable holding the secret itself.
type SecretFlag struct {
	// Name is the secret's name, its key in Options.Secrets.
	Name string
	// Flag names the file that holds it, e.g. "sentinel-password-file".
	Flag string
	// Env is the variable that holds it, e.g. "ELECTD_SENTINEL_PASSWORD".
	Env string
	// Usage is the flag's help.
	Usage string
}

// SecretFlags are the backends' own secrets (backend.Backend.Secrets),
// each once, in the order of backends.go.
func SecretFlags() []SecretFlag {
	var out []SecretFlag
	for _, sec := range backendSecrets() {
		out = append(out, SecretFlag{Name: sec.Name, Flag: sec.FileFlag(), Env: sec.Env(),
			Usage: whoTakes(sec) + " only: read " + sec.About + " from this file (or: $" + sec.Env() + ")"})
	}
	return out
}

// backendSecrets are the secrets of every backend, each once.
func backendSecrets() []backend.Secret {
	var out []backend.Secret
	for _, b := range backends {
		for _, sec := range b.Secrets {
			if !slices.Contains(out, sec) {
				out = append(out, sec)
			}
		}
	}
	return out
}

// whoTakes names the plain schemes of the backends that take sec.
func whoTakes(sec backend.Secret) string {
	var who []string
	for _, b := range backends {
		if slices.Contains(b.Secrets, sec) {
			who = append(who, b.Schemes[0].Name+"://")
		}
	}
	return strings.Join(who, ", ")
}
