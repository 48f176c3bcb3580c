package etcd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/backend"
	"github.com/electd/electd/elector/backend/hosts"
)

// Backend is the etcd backend as the store package lists it:
// etcd://h1:2379,h2:2379 and etcds:// (TLS).
var Backend = backend.Backend{
	Name:           "etcd",
	Schemes:        []backend.Scheme{{Name: "etcd"}, {Name: "etcds", TLS: true}},
	Form:           "etcd://[user@]h1:2379,h2:2379",
	Password:       backend.PasswordWithUser,
	Parse:          hosts.Spec{DefaultPort: "2379", Check: check, Dial: Dial, AnswersPlain: answersPlain}.Parse,
	Refused:        refused,
	PermissionHint: "grant the user's role readwrite on the prefix /electd/",
}

// dialTimeout bounds the client's first connection attempt.
const dialTimeout = 2 * time.Second

// check refuses a path: etcd URLs name hosts only.
func check(ep hosts.Endpoint) error {
	if ep.Path != "" {
		return elector.Configf("store", "etcd URLs take no path, got %q", "/"+ep.Path)
	}
	return nil
}

// Dial opens an etcd client on all of ep's hosts. The client is lazy,
// except that with a user name clientv3 logs in before it returns: while
// etcd does not answer, Dial retries until ctx ends (each attempt ends with
// ctx too); a refused login or certificate is returned at once, and so is
// what ep.Diagnose finds behind a login that timed out.
func Dial(ctx context.Context, ep hosts.Endpoint) (backend.Conn, error) {
	if err := check(ep); err != nil {
		return nil, err
	}
	mem := newMembers(ep.Hosts) // see members.go
	cfg := clientv3.Config{
		Endpoints:            ep.Hosts,
		DialTimeout:          dialTimeout,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		Username:             ep.User,
		Password:             ep.Password,
		TLS:                  ep.TLS,
		Logger:               zap.NewNop(),
		DialOptions:          append(requireLeader(), mem.dialOption()),
	}
	if ep.TLS != nil && ep.TLS.ServerName != "" {
		// gRPC verifies the certificate against the connection's
		// authority, not tls.Config.ServerName.
		cfg.DialOptions = append(cfg.DialOptions, grpc.WithAuthority(ep.TLS.ServerName))
	}
	log := ep.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	backoff := 500 * time.Millisecond
	for {
		cli, err := login(ctx, cfg)
		if err == nil {
			return &conn{cli: cli, members: mem.start(cli)}, nil
		}
		if ep.User == "" || refused(err) != backend.NotRefused || isCertError(err) {
			return nil, fmt.Errorf("connect to etcd: %w", err)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("log in to etcd: %w", context.Cause(ctx))
		}
		if ep.Diagnose != nil {
			// gRPC hides a TLS refusal behind the login's deadline.
			if derr := ep.Diagnose(ctx); derr != nil {
				return nil, derr
			}
		}
		log.Warn("etcd does not answer the login yet; retrying", "err", err, "in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("log in to etcd: %w (last attempt: %v)", context.Cause(ctx), err)
		case <-t.C:
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// login makes one clientv3.New, which logs in when cfg has a user name,
// and ends it when ctx ends. The client it returns does not end with ctx:
// ctx bounds the login only.
func login(ctx context.Context, cfg clientv3.Config) (*clientv3.Client, error) {
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	cfg.Context = cctx
	cli, err := clientv3.New(cfg)
	if !stop() { // ctx ended: the client's own context is cancelled
		if err == nil {
			_ = cli.Close()
			err = context.Cause(ctx)
		}
		return nil, err
	}
	if err != nil {
		cancel()
	}
	return cli, err
}

// conn is an open etcd client; the electors made on it share it.
type conn struct {
	cli     *clientv3.Client
	members *members
}

func (c *conn) NewElector(cand elector.Candidate) (elector.Locker, error) {
	e, err := New(Config{Client: c.cli, Candidate: cand})
	if err != nil {
		return nil, err // not a nil *Elector inside a non-nil Locker
	}
	return e, nil
}

func (c *conn) Ping(ctx context.Context) error {
	_, err := c.cli.Get(ctx, "/electd/health", clientv3.WithCountOnly())
	return err
}

func (c *conn) Close() error {
	c.members.close()
	return c.cli.Close()
}

// refused classifies etcd's refusals of credentials and permissions.
func refused(err error) backend.Refusal {
	switch {
	case errors.Is(err, rpctypes.ErrAuthFailed):
		return backend.RefusedLogin
	case errors.Is(err, rpctypes.ErrUserEmpty), errors.Is(err, rpctypes.ErrUserNotFound):
		return backend.RefusedNoUser
	case errors.Is(err, rpctypes.ErrPermissionDenied):
		return backend.RefusedPermission
	}
	return backend.NotRefused
}

// isCertError reports a TLS refusal, which a login retry cannot fix.
func isCertError(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "x509: ") || strings.Contains(msg, "tls: ")
}

// answersPlain asks for GET /version in clear text. A TLS server answers a
// plain request with an HTTP 400 too; only etcd's own answer counts.
func answersPlain(_ context.Context, c net.Conn) bool {
	if _, err := io.WriteString(c, "GET /version HTTP/1.1\r\nHost: etcd\r\nConnection: close\r\n\r\n"); err != nil {
		return false
	}
	b, _ := io.ReadAll(io.LimitReader(c, 4<<10))
	return strings.HasPrefix(string(b), "HTTP/1.") && strings.Contains(string(b), `"etcdserver"`)
}
