package zk

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/backend"
	"github.com/electd/electd/elector/backend/hosts"
)

// Backend is ZooKeeper for store/: zk://h1:2181,h2:2181[/chroot], and
// zks:// for the ensemble's TLS client port. A user:pass in the URL is
// ZooKeeper digest authentication; the nodes electd creates then carry
// the ACL auth:user:pass (the creator only).
var Backend = backend.Backend{
	Name:           "zookeeper",
	Schemes:        []backend.Scheme{{Name: "zk"}, {Name: "zks", TLS: true}},
	Form:           "zk://[user@]h1:2181,h2:2181[/chroot]",
	About:          "a ZooKeeper ensemble",
	Password:       backend.PasswordWithUser,
	Parse:          hosts.Spec{DefaultPort: "2181", Check: check, Dial: Dial, AnswersPlain: answersPlain}.Parse,
	Refused:        refused,
	PermissionHint: "give the user all permissions (cdrwa) on the chroot's /electd node, or delete /electd so that electd creates it with the user's ACL",
}

// check refuses a chroot ZooKeeper would not take as a path.
func check(ep hosts.Endpoint) error {
	if ep.Path == "" {
		return nil
	}
	for _, part := range strings.Split(ep.Path, "/") {
		if part == "" || part == "." || part == ".." || part == "zookeeper" && !strings.Contains(ep.Path, "/") {
			return elector.Configf("store", "chroot %q is not a ZooKeeper path (no empty, '.' or '..' parts, not /zookeeper)", "/"+ep.Path)
		}
	}
	return nil
}

// Conn is a ZooKeeper store: the hosts and credentials each elector dials
// with. Every elector has a session of its own (its candidacy lives and
// dies with it); Conn itself holds none.
type Conn struct {
	hosts  []string
	chroot string // "" or "/path"
	user   string
	pass   string
	tls    *tls.Config
	logger *slog.Logger
}

// Dial returns the store named by ep. It contacts nothing: each elector
// opens its own session when first used, and Ping opens one to check.
func Dial(_ context.Context, ep hosts.Endpoint) (backend.Conn, error) {
	if err := check(ep); err != nil {
		return nil, err
	}
	c := &Conn{hosts: ep.Hosts, user: ep.User, pass: ep.Password, tls: ep.TLS, logger: ep.Logger}
	if ep.Path != "" {
		c.chroot = "/" + ep.Path
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// NewElector returns a candidate on this store; it contacts nothing.
func (c *Conn) NewElector(cand elector.Candidate) (elector.Locker, error) {
	return New(Config{Candidate: cand, Store: c})
}

// Ping opens a session, reads the root node and closes the session.
func (c *Conn) Ping(ctx context.Context) error {
	s, err := c.open(elector.DefaultTTL)
	if err != nil {
		return &elector.StoreError{Op: "ping", Err: err}
	}
	defer s.close()
	if _, err := s.ready(ctx); err != nil {
		return &elector.StoreError{Op: "ping", Err: err}
	}
	_, err = do(ctx, s, existsOf(c.path("/")))
	if err != nil {
		return &elector.StoreError{Op: "ping", Err: fmt.Errorf("read %s: %w", c.path("/"), err), Permanent: permanent(err)}
	}
	return nil
}

// Close does nothing: the sessions are the electors' own.
func (c *Conn) Close() error { return nil }

// path is p below the chroot.
func (c *Conn) path(p string) string {
	if c.chroot == "" {
		return p
	}
	if p == "/" {
		return c.chroot
	}
	return c.chroot + p
}

// acl is the ACL of the nodes electd creates: the digest user's alone
// with credentials (not the creator's every identity: over TLS a server
// also names a client by its certificate's subject, which would admit any
// client holding a certificate of that subject), anyone's without.
func (c *Conn) acl() []zk.ACL {
	if c.user != "" {
		return zk.DigestACL(zk.PermAll, c.user, c.pass)
	}
	return zk.WorldACL(zk.PermAll)
}

// dialer opens TCP (or TLS) connections for the ZooKeeper client; sniff
// reads what each connection's handshake answer says, which must come
// within answerWithin of the dial (0: no bound but the client's).
func (c *Conn) dialer(sniff func(timeout time.Duration, session int64), answerWithin time.Duration) zk.Dialer {
	return func(network, addr string, timeout time.Duration) (net.Conn, error) {
		var by time.Time
		if answerWithin > 0 {
			by = time.Now().Add(answerWithin)
		}
		d := &net.Dialer{Timeout: timeout}
		var nc net.Conn
		var err error
		if c.tls != nil {
			cfg := c.tls.Clone()
			if cfg.ServerName == "" {
				host, _, _ := net.SplitHostPort(addr)
				cfg.ServerName = host
			}
			nc, err = tls.DialWithDialer(d, network, addr, cfg)
		} else {
			nc, err = d.Dial(network, addr)
		}
		if err != nil {
			return nil, err
		}
		return &sniffer{Conn: nc, found: sniff, by: by}, nil
	}
}

// answersPlain reports whether a ZooKeeper server answers the four-letter
// word "srvr" in clear text (a server that does not allow it closes the
// connection: not a ZooKeeper answer, so false).
func answersPlain(_ context.Context, c net.Conn) bool {
	if _, err := c.Write([]byte("srvr")); err != nil {
		return false
	}
	b := make([]byte, 256)
	n, err := io.ReadAtLeast(c, b, len("Zookeeper version"))
	if err != nil {
		return false
	}
	return strings.HasPrefix(string(b[:n]), "Zookeeper version")
}

// permanent reports whether no retry can fix err: a refusal of the
// credentials or of a permission, or a request the server refuses.
func permanent(err error) bool {
	return errors.Is(err, zk.ErrNoAuth) || errors.Is(err, zk.ErrAuthFailed) || errors.Is(err, zk.ErrInvalidACL) ||
		errors.Is(err, zk.ErrBadArguments) || errors.Is(err, zk.ErrInvalidPath)
}

// refused classifies a refusal for store/.
func refused(err error) backend.Refusal {
	switch {
	case errors.Is(err, zk.ErrAuthFailed):
		return backend.RefusedLogin
	case errors.Is(err, zk.ErrNoAuth), errors.Is(err, zk.ErrInvalidACL):
		return backend.RefusedPermission
	}
	return backend.NotRefused
}
