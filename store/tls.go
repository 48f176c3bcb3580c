package store

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/backend"
)

// tlsConfig builds the TLS configuration of the store connection from
// --ca-file, --cert-file, --key-file and --tls-server-name. It returns nil for
// a plain store URL, and refuses TLS flags given with one. Each refusal
// names the flag.
func tlsConfig(o Options, su *storeURL) (*tls.Config, error) {
	caFile, certFile, keyFile, name := o.CAFile, o.CertFile, o.KeyFile, o.ServerName
	if !su.tls {
		for _, f := range []struct{ flag, v string }{{"ca-file", caFile}, {"cert-file", certFile}, {"key-file", keyFile}, {"tls-server-name", name}} {
			if f.v != "" {
				return nil, elector.Configf(f.flag, "applies only to TLS store URLs (%s), not %s://", tlsSchemes(), su.scheme)
			}
		}
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: name}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, elector.Configf("ca-file", "cannot read it: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, elector.Configf("ca-file", "%s holds no PEM certificate", caFile)
		}
		cfg.RootCAs = pool
	}
	switch {
	case certFile != "" && keyFile == "":
		return nil, elector.Configf("key-file", "is required with --cert-file")
	case certFile == "" && keyFile != "":
		return nil, elector.Configf("cert-file", "is required with --key-file")
	case certFile != "":
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, elector.Configf("cert-file", "cannot load the key pair %s and %s: %v", certFile, keyFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// describeTLS names the TLS settings for the start-up log.
func describeTLS(cfg *tls.Config) string {
	if cfg == nil {
		return "off"
	}
	s := "on"
	if cfg.RootCAs != nil {
		s += ", CA from --ca-file"
	} else {
		s += ", system CAs"
	}
	if len(cfg.Certificates) > 0 {
		s += ", client certificate"
	}
	if cfg.ServerName != "" {
		s += fmt.Sprintf(", server name %q", cfg.ServerName)
	}
	return s
}

// refusal turns an error of the first store request into a
// *elector.ConfigError when retrying cannot fix it: the store's certificate
// is not trusted, the store refuses electd's certificate, a plain client
// meets a TLS server's handshake or the reverse, or the store refuses the
// credentials. It returns nil for anything else (unreachable, timeouts),
// which campaigns retry.
func refusal(su *storeURL, err error) error {
	if err == nil {
		return nil
	}
	msg := su.secrets.scrub(err.Error())
	var (
		unknownCA *x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		alert     tls.AlertError
	)
	switch {
	case errors.As(err, &hostname), strings.Contains(msg, "x509: certificate is valid for"),
		strings.Contains(msg, "x509: cannot validate certificate for"):
		return elector.Configf("tls-server-name", "the store's certificate does not name the host electd connected to (set --tls-server-name to a name it carries): %s", msg)
	case errors.As(err, &unknownCA), errors.As(err, &invalid), strings.Contains(msg, "x509: "):
		return elector.Configf("ca-file", "the store's certificate is not trusted (give the CA that signed it with --ca-file): %s", msg)
	case errors.As(err, &alert), strings.Contains(msg, "remote error: tls: "):
		return elector.Configf("cert-file", "the store refused electd's client certificate, or wants one (--cert-file and --key-file): %s", msg)
	case strings.Contains(msg, "first record does not look like a TLS handshake"):
		return elector.Configf("store", "%s does not speak TLS; use %s:// or enable TLS on the store: %s", su.redacted, su.kind, msg)
	}
	field := su.passwordFrom
	if field == "" {
		field = "store"
	}
	who := "without credentials"
	if su.user != "" {
		who = fmt.Sprintf("as user %q", su.user)
	} else if su.password != "" {
		who = "with the password of the default user"
	}
	switch su.backend.Refused(err) {
	case backend.RefusedLogin:
		return elector.Configf(field, "%s refused the login %s (check the user name and the password): %s", su.kind, who, msg)
	case backend.RefusedNoUser:
		return elector.Configf("store", "%s has authentication on and refused electd %s (put USER in the URL and give the password): %s", su.kind, who, msg)
	case backend.RefusedPermission:
		return elector.Configf("store", "%s refused electd %s a command or key it needs (%s): %s", su.kind, who, su.backend.PermissionHint, msg)
	}
	return nil
}

// diagnoseTLS looks for a TLS mismatch behind a first request that timed
// out (gRPC hides handshake errors behind its deadline): with a TLS URL, it
// makes one handshake per host with cfg and waits briefly for an alert
// (TLS 1.3 servers refuse a client certificate after the handshake); with a
// plain URL, it checks whether the store answers a TLS handshake. It
// returns a *elector.ConfigError from refusal, or nil.
func diagnoseTLS(ctx context.Context, su *storeURL, cfg *tls.Config) error {
	d := &net.Dialer{Timeout: time.Second}
	for _, h := range su.hosts {
		if ctx.Err() != nil {
			return nil
		}
		host, _, _ := net.SplitHostPort(h)
		c := &tls.Config{InsecureSkipVerify: true} // plain URL: only "does it speak TLS?"
		if su.tls {
			c = cfg.Clone()
			if c.ServerName == "" {
				c.ServerName = host
			}
		}
		hctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		conn, err := (&tls.Dialer{NetDialer: d, Config: c}).DialContext(hctx, "tcp", h)
		cancel()
		var alert tls.AlertError
		if !su.tls {
			if err == nil || errors.As(err, &alert) {
				if conn != nil {
					conn.Close()
				}
				return elector.Configf("store", "%s answers with TLS; use %ss://", h, su.kind)
			}
			continue
		}
		if err != nil {
			if cerr := refusal(su, err); cerr != nil {
				return cerr
			}
			if speaksPlain(ctx, su.backend, h) {
				return elector.Configf("store", "%s answers without TLS; use %s:// or enable TLS on the store", h, su.kind)
			}
			continue
		}
		_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
		if cerr := refusal(su, err); cerr != nil {
			return cerr
		}
	}
	return nil
}

// speaksPlain reports whether addr answers the store's protocol in clear
// text (backend.Backend.AnswersPlain).
func speaksPlain(ctx context.Context, b *backend.Backend, addr string) bool {
	d := &net.Dialer{Timeout: 500 * time.Millisecond}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	defer conn.Close()
	deadline := time.Now().Add(500 * time.Millisecond)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = conn.SetDeadline(deadline)
	return b.AnswersPlain(ctx, conn)
}

// tlsSchemes lists the TLS schemes, for messages.
func tlsSchemes() string {
	var all []string
	for _, b := range backends {
		for s, tls := range b.Schemes {
			if tls {
				all = append(all, s+"://")
			}
		}
	}
	sort.Strings(all)
	return strings.Join(all, ", ")
}
