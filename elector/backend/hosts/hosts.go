// Package hosts is the URL syntax the backends on host:port servers share
// (etcd, Redis in its three shapes, Redlock), written once:
//
//	scheme://[user[:password]@]h1:port,h2:port,[::1]:port[/path]
//
// A backend describes what it adds in a Spec (its default port, the check
// of its path and host count, its Dial) and uses Spec.Parse as its
// backend.Backend.Parse; Parse hands its Dial an Endpoint. Errors are
// *elector.ConfigError naming "store", and never show the password.
package hosts

import (
	"context"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/backend"
)

// Spec is a backend on host:port servers: what it adds to the shared
// syntax.
type Spec struct {
	// DefaultPort is shown in errors about a host without a port.
	DefaultPort string
	// Check refuses, with an *elector.ConfigError naming "store", an
	// endpoint the backend cannot use (too many hosts, a path it does not
	// take). It contacts nothing. ep has no Settings yet.
	Check func(ep Endpoint) error
	// Dial opens a connection to an endpoint that passed Check (see
	// backend.Target.Dial).
	Dial func(ctx context.Context, ep Endpoint) (backend.Conn, error)
	// AnswersPlain reports whether conn, a clear-text TCP connection to
	// one of the hosts, answers the backend's protocol (see
	// backend.Target.AnswersPlain).
	AnswersPlain func(ctx context.Context, conn net.Conn) bool
}

// Endpoint is a parsed host-list URL with the settings store/ gathered:
// plain data.
type Endpoint struct {
	// Scheme is the URL's scheme as given (e.g. "etcds").
	Scheme string
	// Hosts are the URL's host:port pairs, at least one, in order.
	Hosts []string
	// Path is the URL's path without its leading and trailing '/'; "" if
	// none.
	Path string
	// User is the URL's user name ("" for none).
	User string
	// Settings are the password (from wherever store/ found it), the
	// backend's own secrets, TLS, the logger and the TLS diagnosis.
	backend.Settings
}

// Parse reads a URL of sp's syntax: the user info, the host list (each
// with a port in 1..65535; IPv6 in brackets), the path; no query or
// fragment. Then sp.Check.
func (sp Spec) Parse(u backend.URL) (backend.Target, error) {
	raw := u.Raw()
	// net/url takes one host; a list such as h1:2379,[::1]:2379 is split
	// here and a placeholder parsed in its place.
	hostList, placeheld := SplitList(raw)
	pu, err := url.Parse(placeheld)
	if err != nil || pu.Host == "" || pu.Opaque != "" {
		return backend.Target{}, elector.Configf("store", "%q is not a URL like %s://host:%s "+
			"(percent-encode '/', '?', '#' and '@' in a password)", u.Redacted, u.Scheme.Name, sp.DefaultPort)
	}
	if pu.RawQuery != "" || pu.ForceQuery || pu.Fragment != "" {
		return backend.Target{}, elector.Configf("store", "%s takes no query string or fragment (TLS files and passwords have their own flags; "+
			"percent-encode '?' and '#' in a password)", u.Redacted)
	}
	if strings.Contains(hostList+pu.Path, "@") {
		return backend.Target{}, elector.Configf("store", "%s has a stray '@' (percent-encode '@', '/', '?' and '#' in a password)", u.Redacted)
	}
	ep := Endpoint{Scheme: u.Scheme.Name, Path: strings.Trim(pu.Path, "/")}
	var password string
	if pu.User != nil {
		ep.User = pu.User.Username()
		password, _ = pu.User.Password()
	}
	for _, h := range strings.Split(hostList, ",") {
		if err := checkHost(h, hostList, sp.DefaultPort); err != nil {
			return backend.Target{}, err
		}
		ep.Hosts = append(ep.Hosts, h)
	}
	if sp.Check != nil {
		if err := sp.Check(ep); err != nil {
			return backend.Target{}, err
		}
	}
	return backend.Target{User: ep.User, Password: password, Hosts: ep.Hosts, AnswersPlain: sp.AnswersPlain,
		Dial: func(ctx context.Context, s backend.Settings) (backend.Conn, error) {
			ep := ep
			ep.Settings = s
			return sp.Dial(ctx, ep)
		}}, nil
}

// checkHost refuses an entry of a host list that is not host:port.
func checkHost(h, list, defaultPort string) error {
	if h == "" {
		return elector.Configf("store", "empty host in the list %q", list)
	}
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		return elector.Configf("store", "host %q needs a port (e.g. %s:%s)", h, h, defaultPort)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return elector.Configf("store", "port %q of %q is not a number in 1..65535", port, host)
	}
	if host == "" {
		return elector.Configf("store", "host missing in %q", h)
	}
	return nil
}

// Placeholder stands for a host list while net/url parses the rest of a
// URL (SplitList).
const Placeholder = "electd-hosts.invalid:1"

// SplitList returns the host list of a URL (what follows "://" and the
// user info, up to '/', '?' or '#') and the URL with Placeholder in its
// place, which net/url can parse. Without "://", or with nothing in that
// place, it returns "" and raw. store/ redacts any URL with it.
func SplitList(raw string) (list, placeheld string) {
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
	return raw[start:end], raw[:start] + Placeholder + raw[end:]
}
