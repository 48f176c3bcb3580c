package store

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/backend"
)

// Options say which store to open, as plain data: the CLI fills them from
// its flags (each field names its flag) and the store package never sees
// a flag. Errors about a field name the flag.
type Options struct {
	// URL is --store: etcd://h1:2379,h2:2379, etcds://…, redis://…, rediss://…
	// (URLHelp lists them all).
	URL string
	// Password is $ELECTD_STORE_PASSWORD; "" when unset.
	Password string
	// PasswordFile is --store-password-file: a file holding the password.
	PasswordFile string
	// Secrets are the backends' own secrets (SecretFlags), by name: the
	// value of $ELECTD_<NAME> and the file --<name>-file names, at most
	// one of them; e.g. the Redis Sentinels' own password, which only a
	// redis+sentinel:// URL takes.
	Secrets map[string]SecretInput
	// CAFile, CertFile, KeyFile and ServerName are --ca-file, --cert-file,
	// --key-file and --tls-server-name, for TLS schemes only.
	CAFile, CertFile, KeyFile, ServerName string
	// GiveUp is how long the caller waits for an unreachable store before
	// it gives up (`electd status` and `leader`: --timeout); 0 when it
	// keeps trying until the store answers (a campaign). Only the warning
	// about a store that does not answer at start says it.
	GiveUp time.Duration
}

// Store is an open store: it makes candidates and says whether it answers.
// Its methods are safe for concurrent use.
type Store struct {
	url  *storeURL
	tls  *tls.Config // nil: plain
	conn backend.Conn
}

// preflightTimeout bounds the first request to the store at start.
const preflightTimeout = 2 * time.Second

// Open checks o and connects. Everything in o is checked before any
// request (a *elector.ConfigError: exit 2). Connections are lazy: an
// unreachable store is not an error here (it is logged; campaigns retry
// until it answers). But a store that answers and refuses electd's
// certificate or credentials is a configuration error, found by one
// request at start. log's records never show the password.
func Open(ctx context.Context, o Options, log *slog.Logger) (*Store, error) {
	su, err := parseStoreURL(o.URL)
	if err != nil {
		return nil, err
	}
	if err := su.setPassword(o); err != nil {
		return nil, err
	}
	tlsCfg, err := tlsConfig(o, su)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = su.secrets.logger(log)
	warnReadableByAll(log, storePassword.FileFlag(), o.PasswordFile)
	for _, sec := range backendSecrets() {
		warnReadableByAll(log, sec.FileFlag(), o.Secrets[sec.Name].File)
	}
	log.Debug("opening the store", "store", su.redacted, "tls", describeTLS(tlsCfg),
		"user", su.user, "password_from", orDash(su.passwordFrom))
	set := backend.Settings{Password: su.password, Secrets: su.own, TLS: tlsCfg, Logger: log}
	if len(su.target.Hosts) > 0 {
		set.Diagnose = func(ctx context.Context) error {
			dctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
			defer cancel()
			return diagnoseTLS(dctx, su, tlsCfg)
		}
	}
	conn, err := su.target.Dial(ctx, set)
	if err != nil {
		var ce *elector.ConfigError
		if errors.As(err, &ce) {
			return nil, su.secrets.err(err)
		}
		if cerr := refusal(su, err); cerr != nil {
			return nil, cerr
		}
		return nil, su.secrets.err(fmt.Errorf("connect to %s: %w", su.redacted, err))
	}
	s := &Store{url: su, tls: tlsCfg, conn: conn}
	if err := s.preflight(ctx, log, o.GiveUp); err != nil {
		_ = conn.Close()
		return nil, su.secrets.err(err)
	}
	return s, nil
}

// NewElector returns a candidate on the store (see backend.Conn). Its
// errors and log carry no credentials.
func (s *Store) NewElector(c elector.Candidate) (elector.Locker, error) {
	c.Logger = s.url.secrets.logger(c.Logger)
	if c.Instrument != nil {
		// Its store errors reach /healthz and the logs of the metrics.
		c.Instrument = scrubbedInstrument{in: c.Instrument, ss: s.url.secrets}
	}
	el, err := s.conn.NewElector(c)
	return el, s.url.secrets.err(err)
}

// Ping makes one cheap request.
func (s *Store) Ping(ctx context.Context) error { return s.url.secrets.err(s.conn.Ping(ctx)) }

// Close closes the connection; close the electors first.
func (s *Store) Close() error { return s.url.secrets.err(s.conn.Close()) }

// Redacted is the store URL without its password, for logs and messages.
func (s *Store) Redacted() string { return s.url.redacted }

// startChecker is a connection with settings worth checking once the store
// answers; it only logs (a warning for a setting that puts the election at
// risk).
type startChecker interface {
	CheckStart(ctx context.Context, log *slog.Logger)
}

// preflight makes one request. A refusal that retrying cannot fix is
// returned; an unreachable store is only logged, with how long the caller
// keeps trying (giveUp; 0: until it answers).
func (s *Store) preflight(parent context.Context, log *slog.Logger, giveUp time.Duration) error {
	ctx, cancel := context.WithTimeout(parent, preflightTimeout)
	defer cancel()
	err := s.conn.Ping(ctx)
	if err == nil {
		if c, ok := s.conn.(startChecker); ok {
			c.CheckStart(ctx, log)
		}
		return nil
	}
	if cerr := refusal(s.url, err); cerr != nil {
		return cerr
	}
	if errors.Is(err, context.Canceled) && parent.Err() != nil {
		return parent.Err()
	}
	// A fresh deadline (the first one is spent), short: a store that is
	// down or black-holed delays the start by preflightTimeout plus this.
	dctx, dcancel := context.WithTimeout(parent, 1500*time.Millisecond)
	defer dcancel()
	if cerr := diagnoseTLS(dctx, s.url, s.tls); cerr != nil {
		return cerr
	}
	if giveUp > 0 {
		log.Warn("the store does not answer yet; electd keeps trying until its timeout", "store", s.url.redacted,
			"timeout", giveUp, "err", s.url.secrets.err(err))
		return nil
	}
	log.Warn("the store does not answer yet; electd keeps trying", "store", s.url.redacted, "err", s.url.secrets.err(err))
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
