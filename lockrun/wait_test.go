package lockrun

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/internal/testenv"
	"github.com/electd/electd/store"
)

// TestNotAcquired: a lock not acquired within --wait is a *BusyError that
// names the holder when another copy holds it, and a
// *store.UnreachableError that names the store when the store does not
// answer; either way Run returns within MaxOverrun of the deadline, the
// reconnecting included. (cmd/electd's TestLockBusyOrUnreachable checks
// the exit codes and messages of the whole process.)
func TestNotAcquired(t *testing.T) {
	const wait = 2 * time.Second
	timing := elector.Timing{TTL: 2 * time.Second}.WithDefaults()
	tests := []struct {
		name  string
		url   func(t *testing.T) string
		held  bool
		check func(t *testing.T, err error)
	}{
		{name: "etcd held", held: true, url: func(t *testing.T) string { return "etcd://" + testenv.StartEtcd(t).Endpoint() }},
		{name: "redis held", held: true, url: func(t *testing.T) string { return "redis://" + testenv.StartRedis(t).Addr() }},
		{name: "etcd killed", url: func(t *testing.T) string {
			e := testenv.StartEtcd(t)
			e.Kill(t)
			return "etcd://" + e.Endpoint()
		}},
		{name: "redis killed", url: func(t *testing.T) string {
			r := testenv.StartRedis(t)
			r.Kill(t)
			return "redis://" + r.Addr()
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			url := tc.url(t)
			st, cand := openJobStore(ctx, t, url, timing)
			if tc.held {
				_, holder := cand("holder")
				if _, err := holder.Campaign(ctx); err != nil {
					t.Fatal(err)
				}
			}
			c, el := cand("waiter")
			start := time.Now()
			l := &Lock{Config: Config{Candidate: c, Wait: wait, Deadline: start.Add(wait)},
				Log: slog.New(slog.DiscardHandler), Store: st, El: el}
			err := l.Run(ctx)
			took := time.Since(start)
			t.Logf("after %v: %v", took.Round(time.Millisecond), err)
			var (
				be *BusyError
				ue *store.UnreachableError
			)
			switch {
			case tc.held && (!errors.As(err, &be) || !strings.HasPrefix(be.Holder, "holder (token ")):
				t.Fatalf("Run = %v, want a *BusyError naming the holder", err)
			case !tc.held && (!errors.As(err, &ue) || ue.Store != url || ue.Err == nil):
				t.Fatalf("Run = %v, want a *store.UnreachableError naming %s", err, url)
			}
			if limit := wait + MaxOverrun + 500*time.Millisecond; took > limit {
				t.Fatalf("--wait %v took %v (more than %v)", wait, took.Round(time.Millisecond), limit)
			}
		})
	}
}

// TestErrorText: what electd prints for a lock not acquired or lost.
// openJobStore opens the store at url and returns it, with a maker of
// candidates for the election "job" on it (one slot, timing); each is
// closed with the test, as is the store.
func openJobStore(ctx context.Context, t *testing.T, url string, timing elector.Timing) (*store.Store, func(id string) (elector.Candidate, elector.Locker)) {
	t.Helper()
	st, err := store.Open(ctx, store.Options{URL: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st, func(id string) (elector.Candidate, elector.Locker) {
		c := elector.Candidate{Election: "job", ID: id, Timing: timing, Slots: 1}
		el, err := st.NewElector(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = el.Close() })
		return c, el
	}
}

func TestErrorText(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{&BusyError{Name: "job", Wait: 0, Slots: 1, Holder: "h1 (token 7)"}, "lock job: not acquired at once (--wait 0); held by h1 (token 7)"},
		{&BusyError{Name: "job", Wait: time.Second, Slots: 3, Holder: "h1 (token 7)"}, "all 3 slots of job: not acquired within --wait 1s; first holder h1 (token 7)"},
		{&BusyError{Name: "job", Wait: time.Second, Slots: 1}, "lock job: not acquired within --wait 1s"},
		{&StoppedError{While: "lock released"}, "stopped: lock released"},
	}
	for _, tc := range tests {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("%#v: %q, want %q", tc.err, got, tc.want)
		}
	}
}
