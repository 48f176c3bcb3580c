package store

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/backend"
)

// tlsConfig builds the TLS configuration of the store connection from
// --ca-file, --cert-file, --key-file and --tls-server-name. It returns nil for
// a plain store URL, and refuses TLS flags given with one, or with a
// backend whose client takes its TLS settings from elsewhere
// (backend.Backend.CredentialsFrom). Each refusal names the flag.
func tlsConfig(o Options, su *storeURL) (*tls.Config, error) {
	caFile, certFile, keyFile, name := o.CAFile, o.CertFile, o.KeyFile, o.ServerName
	if !su.scheme.TLS {
		for _, f := range []struct{ flag, v string }{{"ca-file", caFile}, {"cert-file", certFile}, {"key-file", keyFile}, {"tls-server-name", name}} {
			switch {
			case f.v == "":
			case !takesTLS(su.backend) && su.backend.CredentialsFrom != "":
				return nil, elector.Configf(f.flag, "does not apply to %s://, whose client takes its endpoint, CA and credentials from %s; drop --%s",
					su.scheme.Name, su.backend.CredentialsFrom, f.flag)
			default:
				return nil, elector.Configf(f.flag, "applies only to TLS store URLs (%s), not %s://", tlsSchemes(), su.scheme.Name)
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
	// fix names the TLS flag to fix, or, for a backend whose client takes
	// its TLS settings from elsewhere, that place.
	fix := func(flag, what, how string) error {
		if !su.scheme.TLS && su.backend.CredentialsFrom != "" {
			return elector.Configf("store", "%s (check the settings %s:// takes from %s): %s", what, su.scheme.Name, su.backend.CredentialsFrom, msg)
		}
		return elector.Configf(flag, "%s (%s): %s", what, how, msg)
	}
	switch {
	case errors.As(err, &hostname), strings.Contains(msg, "x509: certificate is valid for"),
		strings.Contains(msg, "x509: cannot validate certificate for"):
		return fix("tls-server-name", "the store's certificate does not name the host electd connected to", "set --tls-server-name to a name it carries")
	case errors.As(err, &unknownCA), errors.As(err, &invalid), strings.Contains(msg, "x509: "):
		return fix("ca-file", "the store's certificate is not trusted", "give the CA that signed it with --ca-file")
	case errors.As(err, &alert), strings.Contains(msg, "remote error: tls: "):
		return fix("cert-file", "the store refused electd's client certificate, or wants one", "--cert-file and --key-file")
	case strings.Contains(msg, "first record does not look like a TLS handshake"):
		return elector.Configf("store", "%s does not speak TLS; %sor enable TLS on the store: %s", su.redacted, use(su), msg)
	}
	field := su.passwordFrom
	if field == "" {
		field = "store"
	}
	who := "without credentials"
	switch {
	case su.backend.CredentialsFrom != "" && su.password == "":
		who = "with the credentials from " + su.backend.CredentialsFrom
	case su.user != "":
		who = fmt.Sprintf("as user %q", su.user)
	case su.password != "":
		who = "with the password of the default user"
	}
	switch su.backend.Refused(err) {
	case backend.RefusedLogin:
		check := "check the user name and the password"
		if su.backend.CredentialsFrom != "" && su.password == "" {
			check = "check the token or certificate they hold, and that it has not expired"
		}
		return elector.Configf(field, "%s refused the login %s (%s): %s", su.kind, who, check, msg)
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
	for _, h := range su.target.Hosts {
		if ctx.Err() != nil {
			return nil
		}
		host, _, _ := net.SplitHostPort(h)
		c := &tls.Config{InsecureSkipVerify: true} // plain URL: only "does it speak TLS?"
		if su.scheme.TLS {
			c = cfg.Clone()
			if c.ServerName == "" {
				c.ServerName = host
			}
		}
		hctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		conn, err := (&tls.Dialer{NetDialer: d, Config: c}).DialContext(hctx, "tcp", h)
		cancel()
		var alert tls.AlertError
		if !su.scheme.TLS {
			// A server's alert ends the handshake: it speaks TLS. (Over TCP
			// Go reports a received alert as "remote error: tls: …", not
			// as a tls.AlertError, which is QUIC's; a TLS 1.2 server that
			// wants a client certificate sends one.)
			if err == nil || errors.As(err, &alert) || strings.Contains(err.Error(), "remote error: tls: ") {
				if conn != nil {
					conn.Close()
				}
				return elector.Configf("store", "%s answers with TLS; %sor turn TLS off on the store", h, use(su))
			}
			continue
		}
		if err != nil {
			if cerr := refusal(su, err); cerr != nil {
				return cerr
			}
			if speaksPlain(ctx, su.target, h) {
				return elector.Configf("store", "%s answers without TLS; %sor enable TLS on the store", h, use(su))
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

// use is "use SCHEME:// " for the scheme of su's backend of the other
// kind (TLS or plain), or "".
func use(su *storeURL) string {
	if o := counterpart(su.backend, su.scheme); o != "" {
		return "use " + o + ":// "
	}
	return ""
}

// speaksPlain reports whether addr answers the store's protocol in clear
// text (backend.Target.AnswersPlain).
func speaksPlain(ctx context.Context, t backend.Target, addr string) bool {
	if t.AnswersPlain == nil {
		return false
	}
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
	return t.AnswersPlain(ctx, conn)
}
