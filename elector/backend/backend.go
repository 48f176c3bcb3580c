// Package backend is the contract between the store package (store/) and
// the backends under elector/: what a backend exports so that store/ can
// list it in one line and hand out its electors. It is apart from package
// elector so that the contract every process links (the supervisor's
// re-executed init included) does not pull in crypto/tls and net.
//
// A backend parses the rest of its own URL (after "scheme://") and holds
// its own credentials; store/ keeps what every store has: the scheme,
// redaction, the password's one source, electd's TLS flags, the refusals
// that exit 2, and the list of backends that the help, the errors and the
// docs' checks are made from. A backend whose URL is a list of host:port
// entries builds its Parse with package hosts (elector/backend/hosts); one
// whose client finds its own endpoint (Kubernetes) writes a Parse of a few
// lines and says where its credentials come from (CredentialsFrom).
package backend

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"strings"

	"github.com/electd/electd/elector"
)

// Backend is what a backend package offers store/: one value, listed in
// one line of store/backends.go. A backend never sees a flag: store/ reads
// the flags and hands it plain data.
type Backend struct {
	// Name names the store in messages, e.g. "etcd".
	Name string
	// Schemes are the URL schemes it takes, the plain one first, e.g.
	// etcd and etcds (TLS).
	Schemes []Scheme
	// Form is the URL of its first scheme as the help and the README show
	// it, e.g. "etcd://[user@]h1:2379,h2:2379"; About, if set, says in a few
	// words what it is ("a quorum of independent Redis servers").
	Form, About string
	// Password says whether it takes the store password (from the URL,
	// $ELECTD_STORE_PASSWORD or --store-password-file); store/ refuses
	// one otherwise, naming where it came from.
	Password Password
	// Secrets are the secrets it takes besides the store password (the
	// Redis Sentinels' own). store/ reads each from its variable or file
	// flag, refuses one given to any other backend, hides it in logs and
	// errors, and hands it to Dial (Settings.Secrets); the CLI makes their
	// flags from this list.
	Secrets []Secret
	// CredentialsFrom, for a backend whose client takes its endpoint, CA
	// and credentials from elsewhere than electd's flags, says where (e.g.
	// "the pod's service account or $KUBECONFIG"). store/ gives it as the
	// fix when it refuses a TLS flag or a password such a backend does not
	// take, and when the store refuses a certificate.
	CredentialsFrom string
	// Parse reads a --store URL of one of Schemes: everything after
	// "scheme://" is the backend's own syntax. It contacts nothing and
	// reads no file. It refuses a URL it cannot use with an
	// *elector.ConfigError naming "store", whose Reason never shows the
	// URL's password (u.Redacted is the URL to show).
	Parse func(u URL) (Target, error)
	// Refused classifies an error of a request: a refusal of the
	// credentials or of a permission, which no retry can fix, or
	// NotRefused.
	Refused func(err error) Refusal
	// PermissionHint says what to grant when the store refuses a
	// permission (RefusedPermission), e.g. "grant the user's role
	// readwrite on the prefix /electd/".
	PermissionHint string
}

// Scheme is a URL scheme and whether it means TLS. With TLS, store/ builds
// a *tls.Config from --ca-file, --cert-file, --key-file and
// --tls-server-name; with a plain scheme it refuses those flags.
type Scheme struct {
	Name string
	TLS  bool
}

// Scheme finds one of b's schemes by name.
func (b *Backend) Scheme(name string) (Scheme, bool) {
	for _, s := range b.Schemes {
		if s.Name == name {
			return s, true
		}
	}
	return Scheme{}, false
}

// Password is how a backend takes the store password.
type Password int

// The kinds of Password. The zero value takes none: a backend takes a
// password only once it says so.
const (
	// NoPassword: its client authenticates otherwise (CredentialsFrom);
	// a password from anywhere is refused.
	NoPassword Password = iota
	// PasswordOptional: a password with or without a user name (Redis: no
	// user name is the default user).
	PasswordOptional
	// PasswordWithUser: a password only with a user name (etcd has no
	// default user).
	PasswordWithUser
)

// Secret is a secret a backend takes besides the store password:
// $ELECTD_<NAME> holds it, or the file --<name>-file names (trailing
// newlines dropped); one of them.
type Secret struct {
	// Name names it and its flag and variable, e.g. "sentinel-password":
	// --sentinel-password-file and $ELECTD_SENTINEL_PASSWORD.
	Name string
	// About says what it is, for the flag's help and errors, e.g. "the
	// Redis Sentinels' own password".
	About string
}

// FileFlag is the flag naming the file that holds s.
func (s Secret) FileFlag() string { return s.Name + "-file" }

// Env is the environment variable that holds s.
func (s Secret) Env() string {
	return "ELECTD_" + strings.ToUpper(strings.ReplaceAll(s.Name, "-", "_"))
}

// URL is a --store URL as store/ hands it to its backend's Parse.
type URL struct {
	// Scheme is the scheme as given, e.g. "etcds".
	Scheme Scheme
	// Rest is everything after "scheme://", credentials included.
	Rest string
	// Redacted is the whole URL with its password hidden: the URL to show
	// in a message.
	Redacted string
}

// Raw is the URL as given; never show it (Redacted is the one to show).
func (u URL) Raw() string { return u.Scheme.Name + "://" + u.Rest }

// Target is a parsed --store URL: the credentials the URL itself holds,
// and how to dial what it names.
type Target struct {
	// User and Password are the credentials in the URL ("" for none).
	// store/ hides the password, refuses a second source of it, checks it
	// against Backend.Password, and hands the one password to Dial.
	User, Password string
	// Hosts are the host:port pairs the backend dials with electd's TLS
	// settings, in order: store/ looks behind a first request that timed
	// out for a TLS mismatch by dialling them (gRPC hides a handshake's
	// error behind its deadline). nil for a store whose client finds its
	// own endpoint.
	Hosts []string
	// AnswersPlain reports whether conn, a clear-text TCP connection to
	// one of Hosts, answers the store's protocol: store/ uses it to tell
	// an operator that a TLS URL points at a plain server.
	AnswersPlain func(ctx context.Context, conn net.Conn) bool
	// Dial opens a connection with the settings store/ gathered. Clients
	// are lazy: an unreachable store is not an error here (Conn.Ping
	// tells), except where the store's client logs in at dial time; then
	// Dial retries until ctx ends, and returns a refusal at once.
	Dial func(ctx context.Context, s Settings) (Conn, error)
}

// Settings are what store/ gathered for a Target besides its URL: plain
// data, every source already checked.
type Settings struct {
	// Password is the store password wherever it came from ("" for none).
	Password string
	// Secrets are the backend's own secrets that were given, by
	// Secret.Name.
	Secrets map[string]string
	// TLS is the TLS configuration from electd's TLS flags; nil for a
	// plain scheme.
	TLS *tls.Config
	// Logger receives the client's own messages; its secrets are scrubbed.
	// nil discards them.
	Logger *slog.Logger
	// Diagnose, when set, looks behind a request that timed out for a
	// refusal that no retry can fix (gRPC hides a TLS handshake's error
	// behind its deadline) and returns it as an *elector.ConfigError
	// naming the flag, or nil. A Dial that retries calls it between
	// attempts.
	Diagnose func(ctx context.Context) error
}

// Conn is a backend's open connection to its store.
type Conn interface {
	// NewElector validates c (elector.Candidate.Validate) and returns a candidate
	// on this connection. It contacts nothing.
	NewElector(c elector.Candidate) (elector.Locker, error)
	// Ping makes one cheap request.
	Ping(ctx context.Context) error
	// Close closes the connection; close the electors first.
	Close() error
}

// Refusal is a kind of refusal by the store, which no retry can fix.
type Refusal int

// The kinds of Refusal.
const (
	NotRefused        Refusal = iota
	RefusedLogin              // the user name or the password is wrong
	RefusedNoUser             // authentication is on and no (known) user was given
	RefusedPermission         // the user may not do what electd needs
)
