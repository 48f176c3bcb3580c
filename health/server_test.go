package health

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/electd/electd/elector"
)

// newTestServer builds a Server over a running View; mod edits the Config.
func newTestServer(t *testing.T, mod func(*Config)) (*Server, *fakeObserver) {
	t.Helper()
	v, o := newRunningView(t)
	cfg := Config{Election: "e", SelfID: "self", View: v, Gatherer: prometheus.NewRegistry()}
	if mod != nil {
		mod(&cfg)
	}
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	return s, o
}

// do runs one request through the handler; remote is the TCP peer.
func do(t *testing.T, s *Server, method, path, remote string, hdr http.Header) *httptest.ResponseRecorder {
	t.Helper()
	return doOn(t, s, false, method, path, remote, hdr)
}

// doOn is do through the admin handler when admin is set, else through the
// main one.
func doOn(t *testing.T, s *Server, admin bool, method, path, remote string, hdr http.Header) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	r.RemoteAddr = remote
	r.Host = "127.0.0.1:4040" // as a local client names electd; see TestRebindingHostRefused
	for k, vs := range hdr {
		if k == "Host" {
			r.Host = vs[0]
			continue
		}
		r.Header[k] = vs
	}
	w := httptest.NewRecorder()
	h := s.Handler()
	if admin {
		h = s.AdminHandler()
	}
	h.ServeHTTP(w, r)
	return w
}

// decode parses a JSON object body, failing on anything else.
func decode(t *testing.T, w *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var m map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
		t.Fatalf("body %q: %v", w.Body.String(), err)
	}
	return m
}

func keys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func TestLeaderEndpoint(t *testing.T) {
	self := elector.Leader{ID: "self", Address: "http://self:4040", Token: 7, Since: t0}
	tests := []struct {
		name    string
		feed    *elector.Leader // nil: nothing observed yet
		leading bool
		code    int
		leader  map[string]any // nil: want "leader":null
	}{
		{name: "unknown", code: 503},
		{name: "nobody leads", feed: &elector.Leader{}, code: 503},
		{name: "other copy leads", feed: &elector.Leader{ID: "b", Address: "http://b:4040", Token: 42, Since: t0}, code: 200,
			leader: map[string]any{"id": "b", "address": "http://b:4040", "fencing_token": 42.0, "since": "2026-03-01T11:00:00.123456789Z"}},
		{name: "this copy leads", feed: &self, leading: true, code: 200,
			leader: map[string]any{"id": "self", "address": "http://self:4040", "fencing_token": 7.0, "since": "2026-03-01T11:00:00.123456789Z"}},
		{name: "no address", feed: &elector.Leader{ID: "c", Token: 3, Since: t0}, code: 200,
			leader: map[string]any{"id": "c", "address": "", "fencing_token": 3.0, "since": "2026-03-01T11:00:00.123456789Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, o := newTestServer(t, func(c *Config) { c.Leading = func() bool { return tt.leading } })
			if tt.feed != nil {
				o.feed(t, *tt.feed)
			}
			w := do(t, s, "GET", "/leader", "192.0.2.1:5555", nil)
			if w.Code != tt.code {
				t.Errorf("code = %d, want %d", w.Code, tt.code)
			}
			m := decode(t, w)
			if got, want := keys(m), []string{"election", "holders", "leader", "self"}; !reflect.DeepEqual(got, want) {
				t.Errorf("keys = %v, want %v", got, want)
			}
			if m["election"] != "e" {
				t.Errorf("election = %v, want e", m["election"])
			}
			wantSelf := map[string]any{"id": "self", "leader": tt.leading}
			if !reflect.DeepEqual(m["self"], wantSelf) {
				t.Errorf("self = %v, want %v", m["self"], wantSelf)
			}
			wantHolders := []any{}
			if tt.leader != nil {
				wantHolders = []any{tt.leader}
			}
			if !reflect.DeepEqual(m["holders"], wantHolders) {
				t.Errorf("holders = %v, want %v", m["holders"], wantHolders)
			}
			if tt.leader == nil {
				if v, ok := m["leader"]; !ok || v != nil {
					t.Errorf("leader = %v (present %v), want null", v, ok)
				}
				return
			}
			if !reflect.DeepEqual(m["leader"], tt.leader) {
				t.Errorf("leader = %v, want %v", m["leader"], tt.leader)
			}
		})
	}
}

func TestReadyz(t *testing.T) {
	tests := []struct {
		name           string
		ready          bool
		code, notReady int // Config values
		want           int
	}{
		{name: "ready default", ready: true, want: 200},
		{name: "not ready default", ready: false, want: 503},
		{name: "ready custom", ready: true, code: 204, notReady: 429, want: 204},
		{name: "not ready custom", ready: false, code: 204, notReady: 429, want: 429},
		{name: "not ready 200 (standby still serving)", ready: false, notReady: 200, want: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newTestServer(t, func(c *Config) {
				c.ReadyCode, c.NotReadyCode = tt.code, tt.notReady
				c.Ready = func() (bool, string) { return tt.ready, "because " + tt.name }
			})
			w := do(t, s, "GET", "/readyz", "192.0.2.1:5555", nil)
			if w.Code != tt.want {
				t.Errorf("code = %d, want %d", w.Code, tt.want)
			}
			if tt.want == http.StatusNoContent {
				if w.Body.Len() != 0 {
					t.Errorf("204 with body %q", w.Body.String())
				}
				return
			}
			m := decode(t, w)
			want := map[string]any{"ready": tt.ready, "reason": "because " + tt.name}
			if !reflect.DeepEqual(m, want) {
				t.Errorf("body = %v, want %v", m, want)
			}
		})
	}
}

func TestReadyzDefaultFollowsLeading(t *testing.T) {
	var leading atomic.Bool
	s, _ := newTestServer(t, func(c *Config) { c.Leading = leading.Load })
	for _, tt := range []struct {
		name    string
		leading bool
		code    int
		reason  string
	}{
		{name: "standby", leading: false, code: 503, reason: "not leading"},
		{name: "leader", leading: true, code: 200, reason: "leading"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			leading.Store(tt.leading)
			w := do(t, s, "GET", "/readyz", "192.0.2.1:5555", nil)
			if w.Code != tt.code {
				t.Errorf("code = %d, want %d", w.Code, tt.code)
			}
			if m := decode(t, w); m["reason"] != tt.reason || m["ready"] != tt.leading {
				t.Errorf("body = %v", m)
			}
		})
	}
}

func TestNewServerConfig(t *testing.T) {
	v := NewView("e", newFakeObserver(), nil)
	tests := []struct {
		name      string
		cfg       Config
		wantField string // "" with wantErr: a non-ConfigError
		wantErr   bool
	}{
		{name: "defaults", cfg: Config{Election: "e", View: v}},
		{name: "codes at the bounds", cfg: Config{Election: "e", View: v, ReadyCode: 200, NotReadyCode: 599}},
		{name: "ready-code too small", cfg: Config{Election: "e", View: v, ReadyCode: 99}, wantErr: true, wantField: "ready-code"},
		{name: "ready-code informational", cfg: Config{Election: "e", View: v, ReadyCode: 100}, wantErr: true, wantField: "ready-code"},
		{name: "ready-code too large", cfg: Config{Election: "e", View: v, ReadyCode: 600}, wantErr: true, wantField: "ready-code"},
		{name: "not-ready-code negative", cfg: Config{Election: "e", View: v, NotReadyCode: -1}, wantErr: true, wantField: "not-ready-code"},
		{name: "not-ready-code too large", cfg: Config{Election: "e", View: v, NotReadyCode: 1000}, wantErr: true, wantField: "not-ready-code"},
		{name: "no election", cfg: Config{View: v}, wantErr: true, wantField: "election"},
		{name: "no view", cfg: Config{Election: "e"}, wantErr: true},
		{name: "token required and given", cfg: Config{Election: "e", View: v, RequireToken: true, AdminToken: "t-0123456789abcdef"}},
		{name: "token required, none given", cfg: Config{Election: "e", View: v, RequireToken: true}, wantErr: true, wantField: "admin-token-required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewServer(tt.cfg)
			if !tt.wantErr {
				if err != nil || s == nil {
					t.Fatalf("NewServer = %v, %v; want a server", s, err)
				}
				return
			}
			if err == nil {
				t.Fatal("NewServer = nil error, want one")
			}
			var ce *elector.ConfigError
			if got := errors.As(err, &ce); got != (tt.wantField != "") {
				t.Fatalf("error %v: ConfigError = %v, want %v", err, got, tt.wantField != "")
			}
			if ce != nil && ce.Field != tt.wantField {
				t.Errorf("Field = %q, want %q", ce.Field, tt.wantField)
			}
		})
	}
}

func TestLivezHealthz(t *testing.T) {
	blocked := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	tests := []struct {
		name        string
		path        string
		live        func() error
		healthy     func(context.Context) error
		containment string
		backoff     func() (int, time.Duration, time.Time)
		code        int
		body        map[string]any
	}{
		{name: "live", path: "/livez", live: func() error { return nil }, code: 200, body: map[string]any{"status": "ok"}},
		{name: "live by default", path: "/livez", code: 200, body: map[string]any{"status": "ok"}},
		{name: "loop stuck", path: "/livez", live: func() error { return errors.New("loop stalled for 1m0s") }, code: 503,
			body: map[string]any{"status": "error", "error": "loop stalled for 1m0s"}},
		{name: "store healthy", path: "/healthz", healthy: func(context.Context) error { return nil }, code: 200, body: map[string]any{"status": "ok"}},
		{name: "store down", path: "/healthz", healthy: func(context.Context) error { return errors.New("session expired") }, code: 503,
			body: map[string]any{"status": "error", "error": "session expired"}},
		{name: "store check times out", path: "/healthz", healthy: blocked, code: 503,
			body: map[string]any{"status": "error", "error": context.DeadlineExceeded.Error()}},
		{name: "healthz reports the containment", path: "/healthz", healthy: func(context.Context) error { return nil }, containment: "pidns",
			code: 200, body: map[string]any{"status": "ok", "containment": "pidns"}},
		{name: "healthz reports the containment when down", path: "/healthz", healthy: func(context.Context) error { return errors.New("down") },
			containment: "pgroup", code: 503, body: map[string]any{"status": "error", "error": "down", "containment": "pgroup"}},
		{name: "healthz reports the child's failures", path: "/healthz", healthy: func(context.Context) error { return nil },
			backoff: func() (int, time.Duration, time.Time) { return 0, time.Second, time.Time{} }, code: 200,
			body: map[string]any{"status": "ok", "child_consecutive_failures": 0.0, "cool_down_seconds": 1.0}},
		{name: "healthz reports a cool-down under way, still 200", path: "/healthz", healthy: func(context.Context) error { return nil },
			backoff: func() (int, time.Duration, time.Time) {
				return 3, 4 * time.Second, time.Date(2026, 12, 1, 10, 0, 4, 0, time.FixedZone("CET", 3600))
			}, code: 200,
			body: map[string]any{"status": "ok", "child_consecutive_failures": 3.0, "cool_down_seconds": 4.0, "cool_down_until": "2026-12-01T09:00:04Z"}},
		{name: "livez ignores the store", path: "/livez", healthy: func(context.Context) error { return errors.New("down") }, code: 200,
			body: map[string]any{"status": "ok"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newTestServer(t, func(c *Config) {
				c.Live, c.Healthy, c.Containment, c.ChildBackoff = tt.live, tt.healthy, tt.containment, tt.backoff
			})
			s.healthTimeout = 10 * time.Millisecond
			w := do(t, s, "GET", tt.path, "192.0.2.1:5555", nil)
			if w.Code != tt.code {
				t.Errorf("code = %d, want %d", w.Code, tt.code)
			}
			if m := decode(t, w); !reflect.DeepEqual(m, tt.body) {
				t.Errorf("body = %v, want %v", m, tt.body)
			}
		})
	}
}

func TestResign(t *testing.T) {
	const token = "s3cret-token-0123456789"
	bearer := func(v string) http.Header { return http.Header{"Authorization": {v}} }
	tests := []struct {
		name      string
		remote    string
		hdr       http.Header
		noResign  bool
		adminTok  string
		leading   bool
		resignErr error
		code      int
		resigned  bool   // Resign must have been called
		errSubstr string // in the JSON "error"
	}{
		{name: "loopback v4", remote: "127.0.0.1:40000", leading: true, code: 200, resigned: true},
		{name: "loopback v4 other", remote: "127.1.2.3:40000", leading: true, code: 200, resigned: true},
		{name: "loopback v6", remote: "[::1]:40000", leading: true, code: 200, resigned: true},
		{name: "loopback v4-mapped v6", remote: "[::ffff:127.0.0.1]:40000", leading: true, code: 200, resigned: true},
		{name: "remote without token", remote: "10.0.0.5:1234", leading: true, code: 403, errSubstr: "loopback"},
		{name: "remote, token not configured", remote: "10.0.0.5:1234", hdr: bearer("Bearer " + token), leading: true, code: 403},
		{name: "remote with token", remote: "10.0.0.5:1234", adminTok: token, hdr: bearer("Bearer " + token), leading: true, code: 200, resigned: true},
		{name: "remote with lower-case scheme", remote: "10.0.0.5:1234", adminTok: token, hdr: bearer("bearer " + token), leading: true, code: 200, resigned: true},
		{name: "remote with wrong token", remote: "10.0.0.5:1234", adminTok: token, hdr: bearer("Bearer nope"), leading: true, code: 403},
		{name: "remote with token prefix", remote: "10.0.0.5:1234", adminTok: token, hdr: bearer("Bearer " + token[:5]), leading: true, code: 403},
		{name: "remote with basic auth", remote: "10.0.0.5:1234", adminTok: token, hdr: bearer("Basic " + token), leading: true, code: 403},
		{name: "forwarded-for loopback is ignored", remote: "10.0.0.5:1234", hdr: http.Header{"X-Forwarded-For": {"127.0.0.1"}, "X-Real-Ip": {"127.0.0.1"}}, leading: true, code: 403},
		{name: "cross-site browser request from loopback", remote: "127.0.0.1:40000", hdr: http.Header{"Sec-Fetch-Site": {"cross-site"}}, leading: true, code: 403, errSubstr: "cross-origin"},
		{name: "same-origin browser request from loopback", remote: "127.0.0.1:40000", hdr: http.Header{"Sec-Fetch-Site": {"same-origin"}}, leading: true, code: 200, resigned: true},
		{name: "not leading", remote: "127.0.0.1:40000", code: 409, errSubstr: "does not lead"},
		{name: "resign fails", remote: "127.0.0.1:40000", leading: true, resignErr: errors.New("store unreachable"), code: 500, resigned: true, errSubstr: "store unreachable"},
		{name: "not supported", remote: "127.0.0.1:40000", noResign: true, leading: true, code: 501},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			s, _ := newTestServer(t, func(c *Config) {
				c.AdminToken = tt.adminTok
				c.Leading = func() bool { return tt.leading }
				if !tt.noResign {
					c.Resign = func(ctx context.Context) error {
						if _, ok := ctx.Deadline(); !ok {
							t.Error("Resign's context has no deadline")
						}
						calls.Add(1)
						return tt.resignErr
					}
				}
			})
			w := do(t, s, "POST", "/resign", tt.remote, tt.hdr)
			if w.Code != tt.code {
				t.Errorf("code = %d, want %d (body %q)", w.Code, tt.code, w.Body.String())
			}
			if got := calls.Load() == 1; got != tt.resigned {
				t.Errorf("Resign called = %v, want %v", got, tt.resigned)
			}
			if tt.code == 200 {
				if m := decode(t, w); m["resigned"] != true {
					t.Errorf("body = %v, want resigned true", m)
				}
			}
			if tt.errSubstr != "" {
				if m := decode(t, w); !strings.Contains(m["error"].(string), tt.errSubstr) {
					t.Errorf("error = %q, want it to contain %q", m["error"], tt.errSubstr)
				}
			}
		})
	}
}

func TestMethodsAndPaths(t *testing.T) {
	tests := []struct {
		method, path string
		code         int
		allow        string // "": not checked
		emptyBody    bool
	}{
		{method: "POST", path: "/leader", code: 405, allow: "GET, HEAD"},
		{method: "DELETE", path: "/readyz", code: 405, allow: "GET, HEAD"},
		{method: "PUT", path: "/metrics", code: 405, allow: "GET, HEAD"},
		{method: "POST", path: "/leader/watch", code: 405, allow: "GET, HEAD"},
		{method: "GET", path: "/resign", code: 405, allow: "POST"},
		{method: "GET", path: "/", code: 404},
		{method: "GET", path: "/nope", code: 404},
		{method: "GET", path: "/leader/", code: 404},
		{method: "HEAD", path: "/leader", code: 503, emptyBody: true},
		{method: "HEAD", path: "/livez", code: 200, emptyBody: true},
		{method: "HEAD", path: "/readyz", code: 503, emptyBody: true},
		{method: "HEAD", path: "/healthz", code: 200, emptyBody: true},
		{method: "HEAD", path: "/metrics", code: 200, emptyBody: true},
		{method: "HEAD", path: "/leader/watch", code: 200, emptyBody: true},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			s, _ := newTestServer(t, nil)
			srv := httptest.NewServer(s.Handler())
			defer srv.Close()
			req, err := http.NewRequest(tt.method, srv.URL+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.code {
				t.Errorf("code = %d, want %d", resp.StatusCode, tt.code)
			}
			if tt.allow != "" && resp.Header.Get("Allow") != tt.allow {
				t.Errorf("Allow = %q, want %q", resp.Header.Get("Allow"), tt.allow)
			}
			if tt.emptyBody && len(body) != 0 {
				t.Errorf("HEAD body = %q, want none", body)
			}
		})
	}
}
