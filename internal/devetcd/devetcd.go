//go:build !noembed

// Package devetcd is a single-member etcd inside the electd process, for
// `electd demo` and `electd dev`. It is not for production: one member, no
// TLS, its data in a directory the caller removes. Production builds leave
// it out with -tags noembed (devetcd_off.go): linking the etcd server costs
// every electd process memory at start even when unused.
package devetcd

import (
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Etcd is a running single-member etcd.
type Etcd struct {
	e       *embed.Etcd
	closing *atomic.Bool // set by Close: the listeners' "server closed" errors are expected then
}

// Start starts etcd with its data in dir, serving clients on clientAddr
// (host:port; port 0 picks a free one), logging at logLevel.
func Start(dir, clientAddr, logLevel string) (*Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Name = "electd-embedded"
	cfg.Dir = dir
	level, err := zapcore.ParseLevel(logLevel)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd log level %q: %w", logLevel, err)
	}
	closing := new(atomic.Bool)
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.Lock(os.Stderr), level)
	// No stack traces (zap.AddStacktrace is not set): an operator of a dev
	// etcd has no use for etcd's own call stacks.
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.New(quietCore{Core: core, closing: closing}))
	cfg.TickMs, cfg.ElectionMs = 10, 100
	cu, err := url.Parse("http://" + clientAddr)
	if err != nil {
		return nil, fmt.Errorf("client address %q: %w", clientAddr, err)
	}
	pu := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd failed: %w", err)
	case <-time.After(30 * time.Second):
		e.Close()
		return nil, fmt.Errorf("embedded etcd not ready after 30s")
	}
	return &Etcd{e: e, closing: closing}, nil
}

// Endpoint is the client host:port.
func (m *Etcd) Endpoint() string { return m.e.Clients[0].Addr().String() }

// Close stops etcd; close its clients first (it waits for them otherwise).
func (m *Etcd) Close() {
	m.closing.Store(true)
	m.e.Close()
}

// quietCore drops what a single-member etcd logs as an error or warning on
// a normal start and stop, and nothing else: on a new data dir, "failed to
// update storage version" and "failed to detect schema version" (no term
// yet: etcd retries and succeeds), and,
// once Close has begun, each listener's "server closed" or "use of closed
// network connection".
type quietCore struct {
	zapcore.Core
	closing *atomic.Bool
}

func (c quietCore) With(fields []zapcore.Field) zapcore.Core {
	return quietCore{Core: c.Core.With(fields), closing: c.closing}
}

func (c quietCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c quietCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	if c.expected(e, fields) {
		return nil
	}
	e.Stack = ""
	return c.Core.Write(e, fields)
}

// expected reports whether e is one of the errors of a normal start or stop.
func (c quietCore) expected(e zapcore.Entry, fields []zapcore.Field) bool {
	err := strings.ToLower(fieldError(fields))
	if strings.Contains(err, "missing term information") {
		return true // "failed to update storage version", "failed to detect schema version"
	}
	return c.closing.Load() && (strings.Contains(err, "server closed") || strings.Contains(err, "use of closed network connection"))
}

// fieldError is the text of the "error" field among fields, or "".
func fieldError(fields []zapcore.Field) string {
	for _, f := range fields {
		if f.Key == "error" {
			if err, ok := f.Interface.(error); ok {
				return err.Error()
			}
			return f.String
		}
	}
	return ""
}
