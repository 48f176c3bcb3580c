package store

import (
	"os"
	"slices"
	"strings"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/backend"
)

// storeURL is a parsed --store URL with its credentials.
type storeURL struct {
	backend *backend.Backend
	kind    string         // the backend's name: "etcd", "redis"
	scheme  backend.Scheme // as given: etcd, etcds, redis, rediss
	target  backend.Target // what the backend's Parse made of the URL
	// user and password are the store's credentials, the password from
	// wherever it came.
	user, password string
	// passwordFrom names where the password came from, as the Field of
	// errors about it: "store", "$ELECTD_STORE_PASSWORD" or
	// "store-password-file"; empty when there is none.
	passwordFrom string
	// own are the backend's own secrets that were given, by name.
	own      map[string]string
	redacted string
	secrets  secrets
}

// parseStoreURL finds the backend of a --store URL's scheme and has it
// parse the rest. Errors name the flag and never echo a password.
func parseStoreURL(raw string) (*storeURL, error) {
	redacted := redact(raw)
	name, rest, ok := strings.Cut(raw, "://")
	if !ok || !validScheme(name) {
		return nil, elector.Configf("store", "%q is not a URL like %s "+
			"(percent-encode '/', '?', '#' and '@' in a password)", redacted, backends[0].Form)
	}
	name = strings.ToLower(name) // as net/url does
	b, scheme := backendFor(name)
	if b == nil {
		return nil, elector.Configf("store", "scheme %q is not one of %s", name, schemes())
	}
	t, err := b.Parse(backend.URL{Scheme: scheme, Rest: rest, Redacted: redacted})
	if err != nil {
		return nil, err
	}
	s := &storeURL{backend: b, kind: b.Name, scheme: scheme, target: t, user: t.User, redacted: redacted}
	if t.Password != "" {
		s.password, s.passwordFrom = t.Password, "store"
	}
	s.secrets = newSecrets(s.password)
	return s, nil
}

// validScheme: a letter, then letters, digits, '+', '-' or '.' (RFC 3986).
func validScheme(s string) bool {
	for i, c := range s {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return s != ""
}

// setPassword takes the password from $ELECTD_STORE_PASSWORD or
// --store-password-file, and the backend's own secrets from theirs. A
// secret may come from one place only; the backend must take it. A
// password needs a user name for etcd; a user name needs a password.
func (s *storeURL) setPassword(o Options) error {
	p, from, err := oneSecret(storePassword, SecretInput{Value: o.Password, File: o.PasswordFile}, s.passwordFrom)
	if err != nil {
		return err
	}
	if p != "" {
		s.password, s.passwordFrom = p, from
	}
	all := []string{s.password}
	for _, sec := range backendSecrets() {
		v, from, err := oneSecret(sec, o.Secrets[sec.Name], "")
		switch {
		case err != nil:
			return err
		case v == "":
			continue
		case !slices.Contains(s.backend.Secrets, sec):
			return elector.Configf(from, "is %s, which %s does not take; use a %s URL or drop it", sec.About, s.redacted, whoTakes(sec))
		}
		if s.own == nil {
			s.own = map[string]string{}
		}
		s.own[sec.Name] = v
		all = append(all, v)
	}
	for name := range o.Secrets {
		if !slices.ContainsFunc(backendSecrets(), func(sec backend.Secret) bool { return sec.Name == name }) {
			return elector.Configf(name+"-file", "is not a secret of any store")
		}
	}
	s.secrets = newSecrets(all...)
	switch {
	case s.password != "" && s.backend.Password == backend.NoPassword:
		return elector.Configf(s.passwordFrom, "%s:// takes no password: its client authenticates with %s; %s",
			s.scheme.Name, orDash(s.backend.CredentialsFrom), dropIt(s.passwordFrom))
	case s.user != "" && s.password == "":
		return elector.Configf("store", "the URL names a user but no password is given (in the URL, $ELECTD_STORE_PASSWORD or --store-password-file)")
	case s.backend.Password == backend.PasswordWithUser && s.password != "" && s.user == "":
		return elector.Configf(s.passwordFrom, "%s needs a user name with a password: %s://USER@%s", s.kind, s.scheme.Name, s.firstHost())
	}
	return nil
}

// SecretInput is where a secret may come from: the value of its
// environment variable, and the file its flag names ("" for unset).
type SecretInput struct{ Value, File string }

// oneSecret reads sec from in: the file, else the variable; "" when
// neither is given. given names a source that gave it already ("" for
// none, "store" for the URL): a second source is refused. from names the
// source as errors name fields ("sentinel-password-file",
// "$ELECTD_SENTINEL_PASSWORD").
func oneSecret(sec backend.Secret, in SecretInput, given string) (value, from string, err error) {
	if in.File != "" {
		from = sec.FileFlag()
		if given == "store" {
			return "", "", elector.Configf(from, "the store URL has %s already; give it in one place only", sec.About)
		}
		b, err := os.ReadFile(in.File)
		if err != nil {
			return "", "", elector.Configf(from, "cannot read it: %v", err)
		}
		if value = strings.TrimRight(string(b), "\r\n"); value == "" {
			return "", "", elector.Configf(from, "%s is empty", in.File)
		}
		given = from
	}
	if in.Value != "" {
		if given != "" {
			return "", "", elector.Configf("$"+sec.Env(), "is set and %s is also given by --%s; give it in one place only", sec.About, given)
		}
		value, from = in.Value, "$"+sec.Env()
	}
	return value, from, nil
}

// dropIt says how to take a secret away from where it came.
func dropIt(from string) string {
	switch {
	case from == "store":
		return "remove it from the URL"
	case strings.HasPrefix(from, "$"):
		return "unset " + from
	}
	return "drop --" + from
}

// firstHost is the URL's first host, for messages; "…" for a store
// without hosts.
func (s *storeURL) firstHost() string {
	if len(s.target.Hosts) == 0 {
		return "…"
	}
	return s.target.Hosts[0]
}
