package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/urfave/cli/v2"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/electd/electd/elector"
	etcdel "github.com/electd/electd/elector/etcd"
	redisel "github.com/electd/electd/elector/redis"
)

// storeURL is a parsed --store value.
type storeURL struct {
	kind     string // "etcd" or "redis"
	scheme   string // as given: etcd, etcds, redis, rediss
	tls      bool
	hosts    []string
	user     string
	password string
	// passwordFrom names where the password came from, as the Field of
	// errors about it: "store", "$ELECTD_STORE_PASSWORD" or
	// "store-password-file"; empty when there is none.
	passwordFrom string
	db           int
	redacted     string
	secrets      secrets
}

// parseStoreURL checks a --store URL. Errors name the flag and never echo
// a password.
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
	switch u.Scheme {
	case "etcd", "etcds":
		s.kind, s.tls = "etcd", u.Scheme == "etcds"
	case "redis", "rediss":
		s.kind, s.tls = "redis", u.Scheme == "rediss"
	default:
		return nil, elector.Configf("store", "scheme %q is not one of etcd, etcds, redis, rediss", u.Scheme)
	}
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
			return nil, elector.Configf("store", "host %q needs a port (e.g. %s:%s)", h, h, map[string]string{"etcd": "2379", "redis": "6379"}[s.kind])
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return nil, elector.Configf("store", "port %q of %q is not a number in 1..65535", port, host)
		}
		if host == "" {
			return nil, elector.Configf("store", "host missing in %q", h)
		}
		s.hosts = append(s.hosts, h)
	}
	path := strings.Trim(u.Path, "/")
	switch s.kind {
	case "etcd":
		if path != "" {
			return nil, elector.Configf("store", "etcd URLs take no path, got %q", "/"+path)
		}
	case "redis":
		if len(s.hosts) != 1 {
			return nil, elector.Configf("store", "redis URLs take one host, got %d", len(s.hosts))
		}
		if path != "" {
			db, err := strconv.Atoi(path)
			if err != nil || db < 0 || db > 65535 {
				return nil, elector.Configf("store", "redis database %q is not a number in 0..65535", path)
			}
			s.db = db
		}
	}
	s.secrets = newSecrets(s.password)
	return s, nil
}

// store is an opened store: it makes candidates and says whether it answers.
type store struct {
	url        *storeURL
	tls        *tls.Config // nil: plain
	newElector func(c candidate) (elector.Elector, error)
	ping       func(ctx context.Context) error
	close      func() error
}

type candidate struct {
	election, id, address string
	timing                elector.Timing
	log                   *slog.Logger
	ins                   elector.Instrument
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

// preflightTimeout bounds the first request to the store at start.
const preflightTimeout = 2 * time.Second

// openStore connects to --store. Connections are lazy: an unreachable store
// is not an error here; campaigns retry until it answers. But a store that
// answers and refuses electd's certificate or credentials is a
// configuration error (*elector.ConfigError: exit 2), found by one request
// at start.
func openStore(c *cli.Context) (*store, error) {
	su, err := parseStoreURL(c.String("store"))
	if err != nil {
		return nil, err
	}
	if err := storePassword(c, su); err != nil {
		return nil, err
	}
	tlsCfg, err := storeTLS(c, su)
	if err != nil {
		return nil, err
	}
	log, err := newLogger(c)
	if err != nil {
		return nil, err
	}
	log = su.secrets.logger(log)
	log.Debug("opening the store", "store", su.redacted, "tls", describeTLS(tlsCfg),
		"user", su.user, "password_from", orDash(su.passwordFrom))
	var st *store
	if su.kind == "etcd" {
		st, err = openEtcd(c.Context, su, tlsCfg, log)
	} else {
		st, err = openRedis(su, tlsCfg, log)
	}
	if err != nil {
		return nil, su.secrets.err(err)
	}
	if err := st.preflight(c.Context, log); err != nil {
		_ = st.close()
		return nil, su.secrets.err(err)
	}
	return st, nil
}

// preflight makes one request. A refusal that retrying cannot fix is
// returned; an unreachable store is only logged.
func (st *store) preflight(parent context.Context, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(parent, preflightTimeout)
	defer cancel()
	err := st.ping(ctx)
	if err == nil {
		return nil
	}
	if cerr := refusal(st.url, err); cerr != nil {
		return cerr
	}
	// A fresh deadline (the first one is spent), short: a store that is
	// down or black-holed delays the start by preflightTimeout plus this.
	dctx, dcancel := context.WithTimeout(parent, 1500*time.Millisecond)
	defer dcancel()
	if cerr := diagnoseTLS(dctx, st.url, st.tls); cerr != nil {
		return cerr
	}
	log.Warn("the store does not answer yet; electd keeps trying", "store", st.url.redacted, "err", err)
	return nil
}

// storePassword fills in the password from $ELECTD_STORE_PASSWORD or
// --store-password-file. A password may come from one place only, and
// needs a user name for etcd; a user name needs a password.
func storePassword(c *cli.Context, su *storeURL) error {
	if f := c.String("store-password-file"); f != "" {
		if su.passwordFrom != "" {
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
		su.password, su.passwordFrom = p, "store-password-file"
	}
	if p, ok := os.LookupEnv("ELECTD_STORE_PASSWORD"); ok && p != "" {
		if su.passwordFrom != "" {
			return elector.Configf("$ELECTD_STORE_PASSWORD", "is set and the password is also given by --%s; give it in one place only", su.passwordFrom)
		}
		su.password, su.passwordFrom = p, "$ELECTD_STORE_PASSWORD"
	}
	su.secrets = newSecrets(su.password)
	switch {
	case su.user != "" && su.password == "":
		return elector.Configf("store", "the URL names a user but no password is given (in the URL, $ELECTD_STORE_PASSWORD or --store-password-file)")
	case su.kind == "etcd" && su.password != "" && su.user == "":
		return elector.Configf(su.passwordFrom, "etcd needs a user name with a password: %s://USER@host:2379", su.scheme)
	}
	return nil
}

func openEtcd(ctx context.Context, su *storeURL, tlsCfg *tls.Config, log *slog.Logger) (*store, error) {
	cfg := clientv3.Config{
		Endpoints:            su.hosts,
		DialTimeout:          preflightTimeout,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		Username:             su.user,
		Password:             su.password,
		TLS:                  tlsCfg,
		Logger:               zap.NewNop(),
	}
	if tlsCfg != nil && tlsCfg.ServerName != "" {
		// gRPC verifies the certificate against the connection's
		// authority, not tls.Config.ServerName.
		cfg.DialOptions = append(cfg.DialOptions, grpc.WithAuthority(tlsCfg.ServerName))
	}
	cli, err := newEtcdClient(ctx, su, cfg, log)
	if err != nil {
		return nil, err
	}
	return &store{
		url: su,
		tls: tlsCfg,
		newElector: func(c candidate) (elector.Elector, error) {
			el, err := etcdel.New(etcdel.Config{Client: cli, Election: c.election, ID: c.id, Address: c.address,
				Timing: c.timing, Logger: su.secrets.logger(c.log), Instrument: c.ins})
			if err != nil {
				return nil, err
			}
			// Not wrapped: callers look for optional interfaces
			// (elector.Slotted, …). The backends' errors carry no
			// credentials; their logs are scrubbed above.
			return el, nil
		},
		ping: func(ctx context.Context) error {
			_, err := cli.Get(ctx, "/electd/health", clientv3.WithCountOnly())
			return su.secrets.err(err)
		},
		close: cli.Close,
	}, nil
}

// newEtcdClient makes the etcd client. With a user name, clientv3.New logs
// in before it returns: while etcd does not answer, it is retried (a store
// that is down at start is not a configuration error); a refused login or
// certificate is returned at once.
func newEtcdClient(ctx context.Context, su *storeURL, cfg clientv3.Config, log *slog.Logger) (*clientv3.Client, error) {
	backoff := 500 * time.Millisecond
	for {
		cli, err := clientv3.New(cfg)
		if err == nil {
			return cli, nil
		}
		if cerr := refusal(su, err); cerr != nil {
			return nil, cerr
		}
		if su.user == "" {
			return nil, fmt.Errorf("connect to %s: %w", su.redacted, err)
		}
		log.Warn("etcd does not answer the login yet; retrying", "store", su.redacted, "err", su.secrets.err(err), "in", backoff)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("log in to %s: %w", su.redacted, err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

func openRedis(su *storeURL, tlsCfg *tls.Config, log *slog.Logger) (*store, error) {
	opts := &goredis.Options{
		Addr:                  su.hosts[0],
		Username:              su.user,
		Password:              su.password,
		DB:                    su.db,
		DialTimeout:           2 * time.Second,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1, // the elector retries on its own clock
		TLSConfig:             tlsCfg,
	}
	if tlsCfg != nil && tlsCfg.ServerName == "" {
		host, _, _ := net.SplitHostPort(su.hosts[0])
		opts.TLSConfig.ServerName = host
	}
	goredis.SetLogger(redisLogger{log: log})
	cli := goredis.NewClient(opts)
	return &store{
		url: su,
		tls: tlsCfg,
		newElector: func(c candidate) (elector.Elector, error) {
			el, err := redisel.New(redisel.Config{Client: cli, Election: c.election, ID: c.id, Address: c.address,
				Timing: c.timing, Logger: su.secrets.logger(c.log), Instrument: c.ins})
			if err != nil {
				return nil, err
			}
			// Not wrapped: callers look for optional interfaces
			// (elector.Slotted, …). The backends' errors carry no
			// credentials; their logs are scrubbed above.
			return el, nil
		},
		ping:  func(ctx context.Context) error { return su.secrets.err(cli.Ping(ctx).Err()) },
		close: cli.Close,
	}, nil
}
