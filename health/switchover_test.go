package health

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/electd/electd/elector"
)

// TestResignTo: POST /resign?to=ID keeps /resign's access rules, and each
// refusal has its status and JSON reason; a copy that does not lead names
// the leader it knows of.
func TestResignTo(t *testing.T) {
	const token = "t-0123456789abcdef"
	const loop, remote = "127.0.0.1:5000", "192.0.2.1:5000"
	tests := []struct {
		name    string
		path    string
		remote  string
		bearer  string
		require bool  // RequireToken
		leading bool  // Leading()
		err     error // what ResignTo returns
		code    int
		reason  string
		called  bool // ResignTo was called
	}{
		{name: "from loopback", path: "/resign?to=c", remote: loop, leading: true, code: http.StatusOK, called: true},
		{name: "from afar without the token", path: "/resign?to=c", remote: remote, leading: true, code: http.StatusForbidden},
		{name: "from afar with the token", path: "/resign?to=c", remote: remote, bearer: token, leading: true, code: http.StatusOK, called: true},
		{name: "token required, loopback without it", path: "/resign?to=c", remote: loop, require: true, leading: true, code: http.StatusForbidden},
		{name: "no candidate named", path: "/resign?to=", remote: loop, leading: true, code: http.StatusBadRequest},
		{name: "not the leader", path: "/resign?to=c", remote: loop, code: http.StatusConflict, reason: ReasonNotLeader},
		{name: "lost the lead meanwhile", path: "/resign?to=c", remote: loop, leading: true, err: elector.ErrNotLeading,
			code: http.StatusConflict, reason: ReasonNotLeader, called: true},
		{name: "not queued", path: "/resign?to=c", remote: loop, leading: true, err: fmt.Errorf("switchover: %w", &elector.NotQueuedError{ID: "c"}),
			code: http.StatusConflict, reason: ReasonNotQueued, called: true},
		{name: "the leader itself", path: "/resign?to=c", remote: loop, leading: true, err: elector.ErrSwitchoverToSelf,
			code: http.StatusConflict, reason: ReasonSelf, called: true},
		{name: "store without switchover", path: "/resign?to=c", remote: loop, leading: true, err: elector.ErrNoSwitchover,
			code: http.StatusNotImplemented, reason: ReasonUnsupported, called: true},
		{name: "store failed", path: "/resign?to=c", remote: loop, leading: true, err: errors.New("store switchover: timeout"),
			code: http.StatusInternalServerError, reason: ReasonFailed, called: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			s, o := newTestServer(t, func(c *Config) {
				c.AdminToken, c.RequireToken = token, tc.require
				c.Leading = func() bool { return tc.leading }
				c.Resign = func(context.Context) error { t.Error("plain Resign called"); return nil }
				c.ResignTo = func(_ context.Context, id string) error { got = append(got, id); return tc.err }
			})
			o.feed(t, leader("n1", 7))
			var hdr http.Header
			if tc.bearer != "" {
				hdr = http.Header{"Authorization": {"Bearer " + tc.bearer}}
			}
			w := do(t, s, http.MethodPost, tc.path, tc.remote, hdr)
			if w.Code != tc.code {
				t.Fatalf("POST %s = %d, want %d: %s", tc.path, w.Code, tc.code, w.Body)
			}
			if called := len(got) > 0; called != tc.called || called && got[0] != "c" {
				t.Fatalf("ResignTo calls %q, want called %v with c", got, tc.called)
			}
			var doc SwitchoverDoc
			if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
				t.Fatalf("body %s: %v", w.Body, err)
			}
			if doc.Reason != tc.reason {
				t.Fatalf("reason %q, want %q: %s", doc.Reason, tc.reason, w.Body)
			}
			if tc.code == http.StatusOK && (!doc.Resigned || doc.HandedTo != "c") {
				t.Fatalf("body %s, want resigned and handed_to c", w.Body)
			}
			if tc.reason == ReasonNotLeader && (doc.Leader == nil || doc.Leader.ID != "n1" || !strings.Contains(doc.Error, "n1 leads")) {
				t.Fatalf("body %s, want the leader n1 named", w.Body)
			}
		})
	}
}

// TestRequestSwitchover: the client's answers from a real server: nil once
// handed over, a *SwitchoverError that says where to run it when the copy
// does not lead, and a refused URL before any request.
func TestRequestSwitchover(t *testing.T) {
	tests := []struct {
		name    string
		leading bool
		url     string // "" the server's
		want    string // in the error; "" none
	}{
		{name: "handed over", leading: true},
		{name: "not the leader", want: "n1 leads (it advertises http://n1:8080): run the switchover with --url set to that copy's --listen address"},
		{name: "not a URL", url: "127.0.0.1:4040", want: "invalid url"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, o := newTestServer(t, func(c *Config) {
				c.Leading = func() bool { return tc.leading }
				c.Resign = func(context.Context) error { return nil }
				c.ResignTo = func(context.Context, string) error { return nil }
				c.AllowedHosts = []string{"127.0.0.1"}
			})
			o.feed(t, leader("n1", 7))
			srv := httptest.NewServer(s.Handler())
			defer srv.Close()
			url := tc.url
			if url == "" {
				url = srv.URL
			}
			err := RequestSwitchover(context.Background(), srv.Client(), url, "", "c")
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("RequestSwitchover: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("RequestSwitchover = %v, want an error with %q", err, tc.want)
			}
			if err != nil {
				t.Logf("%v", err)
			}
		})
	}
}
