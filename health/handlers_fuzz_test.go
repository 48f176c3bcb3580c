package health

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/electd/electd/elector"
)

const fuzzToken = "fuzz-admin-token"

// FuzzHandlers sends arbitrary requests to every endpoint, on the combined
// handler and on the split ones (--admin-listen). No request may panic, get
// a status outside 100..599, or get invalid JSON where JSON is declared;
// /resign may run only from a loopback peer or with the admin token, never
// through the main handler when the admin one is separate; /metrics is never
// served by the main handler then.
// Run: go test -run '^$' -fuzz FuzzHandlers -fuzztime 30s ./health
func FuzzHandlers(f *testing.F) {
	seeds := []struct {
		method, path, remote, auth, origin, site string
		leading, split                           bool
	}{
		{"GET", "/leader", "127.0.0.1:1", "", "", "", true, false},
		{"POST", "/resign", "192.0.2.1:1", "Bearer " + fuzzToken, "", "", true, false},
		{"POST", "/resign", "192.0.2.1:1", "bearer  " + fuzzToken + " ", "", "", true, true},
		{"POST", "/resign", "[::ffff:127.0.0.1]:1", "", "https://evil.example", "cross-site", true, true},
		{"POST", "/resign", "[::1]:1", "", "", "same-origin", false, false},
		{"GET", "/metrics", "10.0.0.1:1", "", "", "", false, true},
		{"HEAD", "/readyz", "x", "", "", "", true, false},
		{"DELETE", "/leader/../resign", "127.0.0.1:1", "", "", "", true, false},
		{"GET", "/leader/watch", "127.0.0.1:1", "", "", "", false, false},
		{"G ET", "//%2e%2e", "", "Basic x", "null", "none", true, true},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, s.remote, s.auth, s.origin, s.site, s.leading, s.split)
	}

	var leading atomic.Bool
	var resigns atomic.Int64
	obs := newFakeObserver()
	view := NewView("e", obs, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- view.Run(ctx) }()
	f.Cleanup(func() { cancel(); <-done })
	obs.ch <- elector.Leader{ID: "self", Address: "http://self", Token: 3, Since: t0}
	servers := map[bool]*Server{}
	for _, split := range []bool{false, true} {
		s, err := NewServer(Config{
			Election: "e", SelfID: "self", View: view, AdminToken: fuzzToken,
			Leading:  leading.Load,
			Resign:   func(context.Context) error { resigns.Add(1); return nil },
			Gatherer: prometheus.NewRegistry(), SeparateAdmin: split,
		})
		if err != nil {
			f.Fatal(err)
		}
		servers[split] = s
	}

	f.Fuzz(func(t *testing.T, method, path, remote, auth, origin, site string, lead, split bool) {
		leading.Store(lead)
		s := servers[split]
		handlers := map[string]http.Handler{"main": s.Handler()}
		if split {
			handlers["admin"] = s.AdminHandler()
		}
		for name, h := range handlers {
			rctx, rcancel := context.WithCancel(context.Background())
			rcancel() // streams (/leader/watch) end at once
			r := (&http.Request{
				Method: method, URL: &url.URL{Path: path}, RequestURI: path, Proto: "HTTP/1.1",
				ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{}, Host: "electd:4040", RemoteAddr: remote,
			}).WithContext(rctx)
			for k, v := range map[string]string{"Authorization": auth, "Origin": origin, "Sec-Fetch-Site": site} {
				if v != "" {
					r.Header.Set(k, v)
				}
			}
			before := resigns.Load()
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)

			if w.Code < 100 || w.Code > 599 {
				t.Fatalf("%s %s %q on %s: status %d", name, method, path, remote, w.Code)
			}
			if w.Header().Get("Content-Type") == "application/json" && w.Body.Len() > 0 && !json.Valid(w.Body.Bytes()) {
				t.Fatalf("%s %s %q: invalid JSON %q", name, method, path, w.Body)
			}
			if resigns.Load() != before {
				if name == "main" && split {
					t.Fatalf("%s %q resigned through the main handler under SeparateAdmin", method, path)
				}
				if !fuzzAuthorized(remote, auth) {
					t.Fatalf("%s %q from %q with %q resigned without loopback or token", method, path, remote, auth)
				}
			}
			if name == "main" && split && strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain; version=0.0.4") {
				t.Fatalf("%s %q served metrics on the main handler under SeparateAdmin", method, path)
			}
		}
	})
}

// fuzzAuthorized is the /resign rule written out independently.
func fuzzAuthorized(remote, auth string) bool {
	if host, _, err := net.SplitHostPort(remote); err == nil {
		if ip, err := netip.ParseAddr(host); err == nil && ip.Unmap().IsLoopback() {
			return true
		}
	}
	scheme, token, ok := strings.Cut(auth, " ")
	return ok && strings.EqualFold(scheme, "bearer") &&
		subtle.ConstantTimeCompare([]byte(strings.TrimSpace(token)), []byte(fuzzToken)) == 1
}
