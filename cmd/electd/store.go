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

	"github.com/electd/electd/elector"
	etcdel "github.com/electd/electd/elector/etcd"
	redisel "github.com/electd/electd/elector/redis"
)

// storeURL is a parsed --store value.
type storeURL struct {
	kind      string // "etcd" or "redis"
	tls       bool
	hosts     []string
	user      string
	password  string
	db        int
	raw       string
	redacted  string
	hasSecret bool
}

// parseStoreURL checks a --store URL. Errors name the flag and never echo
// a password.
func parseStoreURL(raw string) (*storeURL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, elector.Configf("store", "%q is not a URL like etcd://host:2379 or redis://host:6379", redact(raw))
	}
	s := &storeURL{raw: raw}
	switch u.Scheme {
	case "etcd", "etcds":
		s.kind, s.tls = "etcd", u.Scheme == "etcds"
	case "redis", "rediss":
		s.kind, s.tls = "redis", u.Scheme == "rediss"
	default:
		return nil, elector.Configf("store", "scheme %q is not one of etcd, etcds, redis, rediss", u.Scheme)
	}
	if u.User != nil {
		s.user = u.User.Username()
		s.password, s.hasSecret = u.User.Password()
	}
	for _, h := range strings.Split(u.Host, ",") {
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
			if err != nil || db < 0 {
				return nil, elector.Configf("store", "redis database %q is not a number >= 0", path)
			}
			s.db = db
		}
	}
	s.redacted = redact(raw)
	return s, nil
}

// redact hides the password of a URL for logs and errors.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		if i := strings.LastIndex(raw, "@"); i >= 0 {
			if j := strings.Index(raw, "://"); j >= 0 && j < i {
				return raw[:j+3] + "REDACTED" + raw[i:]
			}
		}
		return raw
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "REDACTED")
	}
	return u.String()
}

// store is an opened store: it makes candidates and says whether it answers.
type store struct {
	url        *storeURL
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

// openStore connects to --store. Connections are lazy: an unreachable
// store is not an error here; campaigns retry until it answers.
func openStore(c *cli.Context) (*store, error) {
	su, err := parseStoreURL(c.String("store"))
	if err != nil {
		return nil, err
	}
	if err := storePassword(c, su); err != nil {
		return nil, err
	}
	if su.kind == "etcd" {
		return openEtcd(su)
	}
	return openRedis(su)
}

// storePassword fills in the password from $ELECTD_STORE_PASSWORD or
// --store-password-file when the URL has none.
func storePassword(c *cli.Context, su *storeURL) error {
	if f := c.String("store-password-file"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return elector.Configf("store-password-file", "cannot read %s: %v", f, err)
		}
		su.password, su.hasSecret = strings.TrimRight(string(b), "\r\n"), true
	} else if p, ok := os.LookupEnv("ELECTD_STORE_PASSWORD"); ok && !su.hasSecret {
		su.password, su.hasSecret = p, true
	}
	return nil
}

func openEtcd(su *storeURL) (*store, error) {
	cfg := clientv3.Config{
		Endpoints:            su.hosts,
		DialTimeout:          5 * time.Second,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		Username:             su.user,
		Password:             su.password,
		Logger:               zap.NewNop(),
	}
	if su.tls {
		cfg.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", su.redacted, err)
	}
	return &store{
		url: su,
		newElector: func(c candidate) (elector.Elector, error) {
			return etcdel.New(etcdel.Config{Client: cli, Election: c.election, ID: c.id, Address: c.address,
				Timing: c.timing, Logger: c.log, Instrument: c.ins})
		},
		ping: func(ctx context.Context) error {
			_, err := cli.Get(ctx, "/electd/health", clientv3.WithCountOnly())
			return err
		},
		close: cli.Close,
	}, nil
}

func openRedis(su *storeURL) (*store, error) {
	opts := &goredis.Options{
		Addr:                  su.hosts[0],
		Username:              su.user,
		Password:              su.password,
		DB:                    su.db,
		DialTimeout:           2 * time.Second,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1, // the elector retries on its own clock
	}
	if su.tls {
		opts.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: strings.Split(su.hosts[0], ":")[0]}
	}
	cli := goredis.NewClient(opts)
	return &store{
		url: su,
		newElector: func(c candidate) (elector.Elector, error) {
			return redisel.New(redisel.Config{Client: cli, Election: c.election, ID: c.id, Address: c.address,
				Timing: c.timing, Logger: c.log, Instrument: c.ins})
		},
		ping:  func(ctx context.Context) error { return cli.Ping(ctx).Err() },
		close: cli.Close,
	}, nil
}
