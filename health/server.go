package health

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/backend"
)

// Defaults of the HTTP server. WriteTimeout is larger than every bounded
// handler (healthTimeout, resignTimeout) so their answers are not cut off;
// /leader/watch clears its deadlines.
const (
	DefaultReadyCode    = http.StatusOK
	DefaultNotReadyCode = http.StatusServiceUnavailable

	// MaxStreams is how many /leader/watch streams may be open at once;
	// beyond it the endpoint answers 503.
	MaxStreams = 256
	// MinAdminTokenLen is the fewest characters an admin token may have.
	MinAdminTokenLen = 16
	// MaxStreamsPerClient is how many of them one client address may hold.
	MaxStreamsPerClient = 32

	defaultHeartbeat       = 15 * time.Second
	defaultHealthTimeout   = 3 * time.Second
	defaultResignTimeout   = 10 * time.Second
	defaultShutdownTimeout = 5 * time.Second
	readHeaderTimeout      = 5 * time.Second
	readTimeout            = 10 * time.Second
	writeTimeout           = 30 * time.Second
	maxStreamLife          = time.Hour // then the client reconnects
	idleTimeout            = 2 * time.Minute
	maxHeaderBytes         = 16 << 10
	maxScrapes             = 8 // concurrent /metrics requests; beyond: 503
	maxBodyBytes           = 4 << 10
)

// Config configures a Server. Election and View are required; every func may
// be nil (see each field).
type Config struct {
	// Election and SelfID are reported by /leader.
	Election string
	SelfID   string
	// View supplies the leader for /leader and /leader/watch.
	View *View
	// Leading reports whether this copy holds a term now (self.leader,
	// /resign). nil: never.
	Leading func() bool
	// Ready answers /readyz; reason is shown in the JSON body. nil: ready
	// while Leading.
	Ready func() (ready bool, reason string)
	// Healthy answers /healthz: is the store session healthy. It is given a
	// context bounded by a short timeout. nil: always healthy.
	Healthy func(ctx context.Context) error
	// StoreFailures lists the store operations that fail now (a renewal
	// refused with MISCONF while PING still answers, say): /healthz is 503
	// and names them while any does. nil: none. Metrics.StoreFailures fits.
	StoreFailures func() []StoreFailure
	// StoreMembers reports each member of a store that runs as several (an
	// etcd cluster; store.Store.Members fits). When it reports members,
	// /healthz lists them and they, not Healthy, decide it: healthy while
	// at least one member that the store's requests go to answers with a
	// leader (see the package documentation). It is given the same bounded
	// context as Healthy. nil, or no members reported (Redis): Healthy
	// decides.
	StoreMembers func(ctx context.Context) ([]backend.Member, error)
	// Containment is the containment mode of the child's process tree,
	// reported in the /healthz body ("pidns", "userns", "pgroup", "none"); empty: not
	// reported.
	Containment string
	// ChildBackoff reports, for the /healthz body, how many times in a row
	// the child failed, the cool-down before campaigning again that this
	// gives, and when the cool-down under way ends (zero: none is). They
	// do not change the status: a failing child is not the store's health
	// (/readyz says whether this copy runs it). nil: not reported.
	ChildBackoff func() (failures int, coolDown time.Duration, until time.Time)
	// Status answers GET /status (what `electd status` prints): a reading
	// of the election, as JSON, and whether the store answered it (else
	// 503). It asks the store, at most maxStoreReads requests at once. nil: 501.
	Status func(ctx context.Context) (report any, ok bool)
	// Holders lists every holder of a semaphore (--slots > 1) for the
	// "holders" of GET /leader, asking the store (one read, under the
	// /healthz timeout, at most maxStoreReads requests at once with GET
	// /status; if it fails or must wait, "holders" is the leader alone). nil:
	// the leader is the only holder, and /leader never asks the store.
	Holders func(ctx context.Context) ([]elector.Leader, error)
	// Live answers /livez: is electd's own loop alive. It must not depend on
	// the store. nil: always live.
	Live func() error
	// Resign hands leadership over (POST /resign). nil: 501.
	Resign func(ctx context.Context) error
	// ResignTo hands leadership to the named candidate (POST
	// /resign?to=ID, with Resign's access rules); supervisor.ResignTo fits.
	// nil: 501.
	ResignTo func(ctx context.Context, id string) error
	// AdminToken, when not empty, lets POST /resign in from any address
	// with "Authorization: Bearer <AdminToken>".
	AdminToken string
	// RequireToken turns the loopback exemption of POST /resign off: every
	// peer, loopback included, must present AdminToken (electd's
	// --admin-token-required). Use it when a reverse proxy or sidecar on the
	// same host forwards requests, which then arrive from loopback. It needs
	// an AdminToken.
	RequireToken bool
	// AllowedHosts are the names, besides loopback addresses and
	// localhost, that a request from loopback may give as its Host (the
	// --listen host, --allow-host); other Hosts from loopback are refused,
	// see the package documentation (DNS rebinding).
	AllowedHosts []string
	// ReadyCode and NotReadyCode are the /readyz statuses; 0 means 200 and
	// 503. Each must be a final status, 200..599.
	ReadyCode, NotReadyCode int
	// Gatherer is served on /metrics. nil: prometheus.DefaultGatherer.
	Gatherer prometheus.Gatherer
	// SeparateAdmin moves POST /resign and GET /metrics off Handler and
	// Serve onto AdminHandler and ServeAdmin (electd's --admin-listen), so
	// that the public listener offers only read-only status.
	SeparateAdmin bool
	// Logger receives request-level events, in the group "http". nil: discard.
	Logger *slog.Logger
}

// Server is electd's HTTP API (see the package documentation).
type Server struct {
	cfg     Config
	log     *slog.Logger
	handler http.Handler
	admin   http.Handler  // /resign and /metrics; nil unless SeparateAdmin
	streams *streamSet    // the open /leader/watch streams
	reads   chan struct{} // the store reads requests may make at once (maxStoreReads)

	// Tunables; tests shorten them.
	heartbeat       time.Duration
	healthTimeout   time.Duration
	resignTimeout   time.Duration
	shutdownTimeout time.Duration
	readTimeout     time.Duration
	writeTimeout    time.Duration
	maxStreamLife   time.Duration
}

// CheckSettings checks the fields an operator sets (the status codes, the
// admin token), so that a command can refuse them before it touches the
// network; NewServer checks them again. A bad status code is reported as
// *elector.ConfigError with Field "ready-code" or "not-ready-code", and
// RequireToken without an AdminToken with Field "admin-token-required".
func (cfg Config) CheckSettings() error {
	if _, err := statusCode("ready-code", cfg.ReadyCode, DefaultReadyCode); err != nil {
		return err
	}
	if _, err := statusCode("not-ready-code", cfg.NotReadyCode, DefaultNotReadyCode); err != nil {
		return err
	}
	if n := utf8.RuneCountInString(cfg.AdminToken); n > 0 && n < MinAdminTokenLen {
		return elector.Configf("admin-token", "is %d characters; use at least %d random ones (e.g. openssl rand -hex 16)", n, MinAdminTokenLen)
	}
	if cfg.RequireToken && cfg.AdminToken == "" {
		return elector.Configf("admin-token-required",
			"needs an admin token, or nobody could resign over HTTP; set --admin-token (or $ELECTD_ADMIN_TOKEN), or leave --admin-token-required off")
	}
	return nil
}

// NewServer checks cfg (see CheckSettings) and builds the Server.
func NewServer(cfg Config) (*Server, error) {
	if cfg.Election == "" {
		return nil, &elector.ConfigError{Field: "election", Reason: "must not be empty"}
	}
	if cfg.View == nil {
		return nil, errors.New("health server: nil view")
	}
	if err := cfg.CheckSettings(); err != nil {
		return nil, err
	}
	cfg.ReadyCode, _ = statusCode("ready-code", cfg.ReadyCode, DefaultReadyCode)
	cfg.NotReadyCode, _ = statusCode("not-ready-code", cfg.NotReadyCode, DefaultNotReadyCode)
	if cfg.Leading == nil {
		cfg.Leading = func() bool { return false }
	}
	if cfg.Ready == nil {
		leading := cfg.Leading
		cfg.Ready = func() (bool, string) {
			if leading() {
				return true, "leading"
			}
			return false, "not leading"
		}
	}
	if cfg.Healthy == nil {
		cfg.Healthy = func(context.Context) error { return nil }
	}
	if cfg.Live == nil {
		cfg.Live = func() error { return nil }
	}
	if cfg.Gatherer == nil {
		cfg.Gatherer = prometheus.DefaultGatherer
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg:             cfg,
		log:             log.WithGroup("http"),
		streams:         newStreamSet(MaxStreams, MaxStreamsPerClient),
		reads:           make(chan struct{}, maxStoreReads),
		heartbeat:       defaultHeartbeat,
		healthTimeout:   defaultHealthTimeout,
		resignTimeout:   defaultResignTimeout,
		shutdownTimeout: defaultShutdownTimeout,
		readTimeout:     readTimeout,
		writeTimeout:    writeTimeout,
		maxStreamLife:   maxStreamLife,
	}
	s.handler = s.checkHost(s.routes())
	if cfg.SeparateAdmin {
		s.admin = s.checkHost(s.adminRoutes())
	}
	return s, nil
}

// statusCode applies def to 0 and refuses codes that cannot be a final HTTP
// status (1xx would be sent as an informational response, then 200).
func statusCode(field string, code, def int) (int, error) {
	if code == 0 {
		return def, nil
	}
	if code < 200 || code > 599 {
		return 0, elector.Configf(field, "%d is not an HTTP status code in 200..599", code)
	}
	return code, nil
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	// A "GET" pattern also serves HEAD. For a known path with another
	// method the mux answers 405 with an Allow header; unknown paths get 404.
	mux.HandleFunc("GET /leader", s.handleLeader)
	mux.HandleFunc("GET /leader/watch", s.handleWatch)
	mux.HandleFunc("GET /readyz", s.handleReady)
	mux.HandleFunc("GET /livez", s.handleLive)
	mux.HandleFunc("GET /healthz", s.handleHealth)
	mux.Handle("GET /status", s.statusHandler())
	if !s.cfg.SeparateAdmin {
		s.adminOn(mux)
	}
	return mux
}

// adminRoutes is the handler of the separate admin listener.
func (s *Server) adminRoutes() http.Handler {
	mux := http.NewServeMux()
	s.adminOn(mux)
	return mux
}

// adminOn registers /metrics and /resign on mux.
func (s *Server) adminOn(mux *http.ServeMux) {
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.cfg.Gatherer, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
		// A scrape is cheap; more at once is a client misbehaving.
		MaxRequestsInFlight: maxScrapes,
	}))
	// Browsers attach ambient access (a page on this host reaching
	// localhost) to cross-site requests; refuse those on the one mutating
	// endpoint. Non-browser clients send no Sec-Fetch-Site/Origin and pass.
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.log.Warn("resign refused: cross-origin browser request", "remote", r.RemoteAddr)
		writeError(w, http.StatusForbidden, "cross-origin browser requests may not resign")
	}))
	mux.Handle("POST /resign", cop.Handler(http.HandlerFunc(s.handleResign)))
}

// Handler returns the HTTP handler of every endpoint (without /resign and
// /metrics under SeparateAdmin). /leader/watch streams served through it
// (outside Serve) end when their client disconnects.
func (s *Server) Handler() http.Handler { return s.handler }

// AdminHandler returns the handler of /resign and /metrics under
// SeparateAdmin, else nil.
func (s *Server) AdminHandler() http.Handler { return s.admin }

type stopKey struct{}

// stopping returns the channel that Serve closes when it shuts down, or nil
// (never ready) for requests that did not come through Serve.
func stopping(ctx context.Context) <-chan struct{} {
	ch, _ := ctx.Value(stopKey{}).(chan struct{})
	return ch
}

// Serve answers on ln until ctx ends, then shuts down gracefully: it stops
// accepting, ends /leader/watch streams, and waits (bounded) for requests in
// flight. It returns nil after a clean shutdown. ln is closed on return.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	return s.serve(ctx, ln, s.handler, "api")
}

// ServeAdmin serves AdminHandler on ln as Serve does; it needs
// SeparateAdmin.
func (s *Server) ServeAdmin(ctx context.Context, ln net.Listener) error {
	if s.admin == nil {
		_ = ln.Close()
		return errors.New("health server: ServeAdmin without SeparateAdmin")
	}
	return s.serve(ctx, ln, s.admin, "admin")
}

func (s *Server) serve(ctx context.Context, ln net.Listener, h http.Handler, name string) error {
	stop := make(chan struct{})
	log := s.log.With("listener", name)
	srv := &http.Server{
		// No endpoint reads a request body: refuse large ones early.
		Handler:           http.MaxBytesHandler(h, maxBodyBytes),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       s.readTimeout,
		WriteTimeout:      s.writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		BaseContext: func(net.Listener) context.Context {
			return context.WithValue(context.Background(), stopKey{}, stop)
		},
	}
	// Shutdown runs this after closing the listeners: streams never go
	// idle by themselves, so they must be told to end.
	srv.RegisterOnShutdown(func() { close(stop) })

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("listening", "addr", ln.Addr().String())

	select {
	case err := <-errc:
		srv.Close()
		return fmt.Errorf("http serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
		<-errc
		return fmt.Errorf("http shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http serve on %s: %w", ln.Addr(), err)
	}
	log.Info("stopped")
	return nil
}
