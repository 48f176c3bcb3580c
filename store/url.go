package store

import (
	"crypto/tls"
	"log/slog"
	"net"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/backend"
)

// storeURL is a parsed --store value with its password.
type storeURL struct {
	backend  *backend.Backend
	kind     string // the backend's name: "etcd", "redis"
	scheme   string // as given: etcd, etcds, redis, rediss
	tls      bool
	hosts    []string
	path     string // without its slashes
	user     string
	password string
	// passwordFrom names where the password came from, as the Field of
	// errors about it: "store", "$ELECTD_STORE_PASSWORD" or
	// "store-password-file"; empty when there is none.
	passwordFrom string
	// sentinelPassword is the sentinels' (redis+sentinel:// only).
	sentinelPassword string
	redacted         string
	secrets          secrets
}

// backendFor finds the backend of a scheme.
func backendFor(scheme string) (*backend.Backend, bool) {
	for _, b := range backends {
		if tls, ok := b.Schemes[scheme]; ok {
			return b, tls
		}
	}
	return nil, false
}

// schemes lists every scheme, for messages.
func schemes() string {
	var all []string
	for _, b := range backends {
		for s := range b.Schemes {
			all = append(all, s)
		}
	}
	sort.Strings(all)
	return strings.Join(all, ", ")
}

// parseStoreURL checks a --store URL, with the backend's own rules for its
// hosts and path. Errors name the flag and never echo a password.
func parseStoreURL(raw string) (*storeURL, error) {
	// net/url takes one host; a list such as h1:2379,[::1]:2379 is split
	// here and a placeholder parsed in its place.
	hostList, placeheld := splitHostList(raw)
	u, err := url.Parse(placeheld)
	if err != nil || u.Scheme == "" || u.Host == "" || u.Opaque != "" {
		return nil, elector.Configf("store", "%q is not a URL like etcd://host:2379 or redis://host:6379 "+
			"(percent-encode '/', '?', '#' and '@' in a password)", redact(raw))
	}
	s := &storeURL{scheme: u.Scheme, redacted: redact(raw)}
	b, isTLS := backendFor(u.Scheme)
	if b == nil {
		return nil, elector.Configf("store", "scheme %q is not one of %s", u.Scheme, schemes())
	}
	s.backend, s.kind, s.tls = b, b.Name, isTLS
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return nil, elector.Configf("store", "%s takes no query string or fragment (TLS files and passwords have their own flags; "+
			"percent-encode '?' and '#' in a password)", s.redacted)
	}
	if strings.Contains(hostList+u.Path, "@") {
		return nil, elector.Configf("store", "%s has a stray '@' (percent-encode '@', '/', '?' and '#' in a password)", s.redacted)
	}
	if u.User != nil {
		s.user = u.User.Username()
		if p, ok := u.User.Password(); ok && p != "" {
			s.password, s.passwordFrom = p, "store"
		}
	}
	for _, h := range strings.Split(hostList, ",") {
		if h == "" {
			return nil, elector.Configf("store", "empty host in the list %q", hostList)
		}
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			return nil, elector.Configf("store", "host %q needs a port (e.g. %s:%s)", h, h, b.DefaultPort)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return nil, elector.Configf("store", "port %q of %q is not a number in 1..65535", port, host)
		}
		if host == "" {
			return nil, elector.Configf("store", "host missing in %q", h)
		}
		s.hosts = append(s.hosts, h)
	}
	s.path = strings.Trim(u.Path, "/")
	if err := b.Check(s.endpoint(nil, nil)); err != nil {
		return nil, err
	}
	s.secrets = newSecrets(s.password)
	return s, nil
}

// endpoint is what the backend dials.
func (s *storeURL) endpoint(tlsCfg *tls.Config, log *slog.Logger) backend.Endpoint {
	return backend.Endpoint{Scheme: s.scheme, Hosts: s.hosts, Path: s.path, User: s.user, Password: s.password,
		SentinelPassword: s.sentinelPassword, TLS: tlsCfg, Logger: log}
}

// setPassword fills in the password from $ELECTD_STORE_PASSWORD or
// --store-password-file. A password may come from one place only, and
// needs a user name for etcd; a user name needs a password.
func (s *storeURL) setPassword(o Options) error {
	if f := o.PasswordFile; f != "" {
		if s.passwordFrom != "" {
			return elector.Configf("store-password-file", "the store URL has a password already; give it in one place only")
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return elector.Configf("store-password-file", "cannot read it: %v", err)
		}
		p := strings.TrimRight(string(b), "\r\n")
		if p == "" {
			return elector.Configf("store-password-file", "%s is empty", f)
		}
		s.password, s.passwordFrom = p, "store-password-file"
	}
	if p := o.Password; p != "" {
		if s.passwordFrom != "" {
			return elector.Configf("$ELECTD_STORE_PASSWORD", "is set and the password is also given by --%s; give it in one place only", s.passwordFrom)
		}
		s.password, s.passwordFrom = p, "$ELECTD_STORE_PASSWORD"
	}
	if err := s.setSentinelPassword(o); err != nil {
		return err
	}
	s.secrets = newSecrets(s.password, s.sentinelPassword)
	switch {
	case s.user != "" && s.password == "":
		return elector.Configf("store", "the URL names a user but no password is given (in the URL, $ELECTD_STORE_PASSWORD or --store-password-file)")
	case s.backend.UserWithPassword && s.password != "" && s.user == "":
		return elector.Configf(s.passwordFrom, "%s needs a user name with a password: %s://USER@%s", s.kind, s.scheme, s.hosts[0])
	}
	return nil
}

// setSentinelPassword takes the sentinels' password from
// $ELECTD_SENTINEL_PASSWORD or --sentinel-password-file, for a backend that
// has sentinels.
func (s *storeURL) setSentinelPassword(o Options) error {
	field, p := "", ""
	switch {
	case o.SentinelPassword != "" && o.SentinelPasswordFile != "":
		return elector.Configf("sentinel-password-file", "$ELECTD_SENTINEL_PASSWORD is set too; give the sentinels' password in one place only")
	case o.SentinelPassword != "":
		field, p = "$ELECTD_SENTINEL_PASSWORD", o.SentinelPassword
	case o.SentinelPasswordFile != "":
		field = "sentinel-password-file"
		b, err := os.ReadFile(o.SentinelPasswordFile)
		if err != nil {
			return elector.Configf(field, "cannot read it: %v", err)
		}
		if p = strings.TrimRight(string(b), "\r\n"); p == "" {
			return elector.Configf(field, "%s is empty", o.SentinelPasswordFile)
		}
	default:
		return nil
	}
	if !s.backend.SentinelPassword {
		return elector.Configf(field, "is the password of Redis Sentinels, and %s has none; use a redis+sentinel:// URL or drop it", s.redacted)
	}
	s.sentinelPassword = p
	return nil
}

// hostPlaceholder stands for the host list while net/url parses the rest.
const hostPlaceholder = "electd-hosts.invalid:1"

// splitHostList returns the host list of a URL (what follows "://" and the
// user info, up to '/', '?' or '#') and the URL with hostPlaceholder in its
// place. Without "://" it returns "" and raw.
func splitHostList(raw string) (hosts, placeheld string) {
	i := strings.Index(raw, "://")
	if i < 0 {
		return "", raw
	}
	start := i + 3
	end := len(raw)
	if j := strings.IndexAny(raw[start:], "/?#"); j >= 0 {
		end = start + j
	}
	if at := strings.LastIndex(raw[start:end], "@"); at >= 0 {
		start += at + 1
	}
	if start == end {
		return "", raw
	}
	return raw[start:end], raw[:start] + hostPlaceholder + raw[end:]
}
