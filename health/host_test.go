package health

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestRebindingHostRefused: a request from loopback must name a loopback
// address, localhost, or an allowed name (the listen host) in its Host
// header; a DNS-rebinding page (Host: evil.example, from a browser on this
// host) is refused on every endpoint, /resign included. Peers from
// elsewhere name whatever host they reached electd by.
func TestRebindingHostRefused(t *testing.T) {
	resigned := 0
	s, _ := newTestServer(t, func(c *Config) {
		c.Leading = func() bool { return true }
		c.Resign = func(context.Context) error { resigned++; return nil }
		c.AllowedHosts = []string{"electd.example"}
	})
	const loop, remote = "127.0.0.1:5000", "192.0.2.1:5000"
	tests := []struct {
		name         string
		method, path string
		remote, host string
		origin       string
		code         int
	}{
		{name: "resign, rebinding Host with a matching Origin", method: "POST", path: "/resign", remote: loop,
			host: "evil.example:4040", origin: "http://evil.example:4040", code: http.StatusForbidden},
		{name: "resign, rebinding Host", method: "POST", path: "/resign", remote: loop, host: "evil.example:4040", code: http.StatusForbidden},
		{name: "leader, rebinding Host", method: "GET", path: "/leader", remote: loop, host: "evil.example:4040", code: http.StatusForbidden},
		{name: "watch, rebinding Host", method: "GET", path: "/leader/watch", remote: loop, host: "evil.example", code: http.StatusForbidden},
		{name: "healthz, rebinding Host", method: "GET", path: "/healthz", remote: loop, host: "evil.example:4040", code: http.StatusForbidden},
		{name: "metrics, rebinding Host", method: "GET", path: "/metrics", remote: loop, host: "evil.example:4040", code: http.StatusForbidden},
		{name: "readyz, rebinding Host", method: "GET", path: "/readyz", remote: loop, host: "evil.example:4040", code: http.StatusForbidden},
		{name: "localhost prefix is not localhost", method: "GET", path: "/leader", remote: loop, host: "localhost.evil.example", code: http.StatusForbidden},
		{name: "loopback IPv4 literal", method: "GET", path: "/leader", remote: loop, host: "127.0.0.1:4040", code: http.StatusServiceUnavailable},
		{name: "loopback IPv6 literal", method: "GET", path: "/leader", remote: "[::1]:5000", host: "[::1]:4040", code: http.StatusServiceUnavailable},
		{name: "localhost", method: "GET", path: "/metrics", remote: loop, host: "localhost:4040", code: http.StatusOK},
		{name: "localhost, upper case, trailing dot", method: "GET", path: "/metrics", remote: loop, host: "LOCALHOST.:4040", code: http.StatusOK},
		{name: "allowed name", method: "GET", path: "/metrics", remote: loop, host: "electd.example:4040", code: http.StatusOK},
		{name: "resign from loopback, localhost", method: "POST", path: "/resign", remote: loop, host: "localhost:4040", code: http.StatusOK},
		{name: "another host's peer may name any host", method: "GET", path: "/leader", remote: remote, host: "evil.example:4040", code: http.StatusServiceUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hdr := http.Header{"Host": {tc.host}}
			if tc.origin != "" {
				hdr.Set("Origin", tc.origin)
			}
			// Before the fix, the watch streamed: its context ends it.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			r := httptest.NewRequestWithContext(ctx, tc.method, tc.path, nil)
			r.RemoteAddr, r.Host = tc.remote, tc.host
			for k, vs := range hdr {
				if k != "Host" {
					r.Header[k] = vs
				}
			}
			w := httptest.NewRecorder()
			s.Handler().ServeHTTP(w, r)
			if w.Code != tc.code {
				t.Fatalf("%s %s from %s with Host %s = %d, want %d: %s", tc.method, tc.path, tc.remote, tc.host, w.Code, tc.code, w.Body)
			}
		})
	}
	if resigned != 1 {
		t.Fatalf("Resign called %d times, want 1 (from localhost only)", resigned)
	}
}
