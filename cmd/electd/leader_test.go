package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/internal/testenv"
	"github.com/electd/electd/store"
)

// TestLeaderEscapesStoreText: `electd leader` prints text that someone
// with write access to the store wrote (a candidate key of another tool)
// with its control characters escaped, so that it cannot forge lines or
// drive the terminal.
func TestLeaderEscapesStoreText(t *testing.T) {
	e := testenv.StartEtcd(t)
	forged := "x\x1b[2K\r\x07z: real-leader token=999 address=http://attacker\n\u202ez"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.Client(t).Put(ctx, "/electd/elections/forge/1", forged); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, format string
		want         string
	}{
		{name: "text", format: "text", want: `forge: x\x1b[2K\r\az: real-leader token=999 address=http://attacker\n\u202ez token=`},
		{name: "json", format: "json", want: `"id":"x\u001b[2K\r\u0007z: real-leader token=999 address=http://attacker\n` + "\u202e" + `z"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runElectd(t, 30*time.Second, nil, "leader", "--store", e.URL(), "--election", "forge", "-o", tc.format)
			if r.code != 0 {
				t.Fatalf("want exit 0:\n%s", r)
			}
			if strings.Count(r.stdout, "\n") != 1 || strings.ContainsAny(strings.TrimSuffix(r.stdout, "\n"), "\x1b\x07\r\n") {
				t.Fatalf("control characters printed raw: %q", r.stdout)
			}
			if !strings.Contains(r.stdout, tc.want) {
				t.Fatalf("stdout %q does not contain %q", r.stdout, tc.want)
			}
		})
	}
}

// TestLeaderWatch: `electd leader --watch` prints a term once, even when
// the store publishes it twice (etcd: before and after the leader writes
// its start time), and when the store goes away it says so on stderr, not
// "no leader" on stdout; with --timeout it gives up and exits 69.
func TestLeaderWatch(t *testing.T) {
	for _, tc := range killableStores() {
		t.Run(tc.name, func(t *testing.T) {
			url, kill := tc.start(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			watch := electdCmd(ctx, t, nil, "leader", "--store", url, "--election", "w", "--watch", "--timeout", "3s")
			var out, errb lockedBuffer
			watch.Stdout, watch.Stderr = &out, &errb
			if err := watch.Start(); err != nil {
				t.Fatal(err)
			}
			waitLog(t, &out, "w: no leader")

			st, err := store.Open(ctx, store.Options{URL: url}, nil)
			if err != nil {
				t.Fatal(err)
			}
			el, err := st.NewElector(elector.Candidate{Election: "w", ID: "a", Timing: elector.Timing{TTL: 2 * time.Second}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := el.Campaign(ctx); err != nil {
				t.Fatal(err)
			}
			waitLog(t, &out, "w: a token=")
			time.Sleep(time.Second) // the leader's own since reaches the observer
			if n := strings.Count(out.String(), "w: a token="); n != 1 {
				t.Fatalf("the term was printed %d times:\n%s", n, out.String())
			}

			kill()
			waited := make(chan error, 1)
			go func() { waited <- watch.Wait() }()
			select {
			case err := <-waited:
				wantExit(t, err, exitNoStore, &errb)
			case <-time.After(time.Minute):
				t.Fatalf("leader --watch --timeout 3s still ran a minute after the store was killed:\nstdout:\n%s\nstderr:\n%s", out.String(), errb.String())
			}
			stdout, stderr := out.String(), errb.String()
			t.Logf("stdout:\n%sstderr:\n%s", stdout, stderr)
			if strings.Count(stdout, "no leader") != 1 {
				t.Fatalf("printed \"no leader\" while the store was unreachable:\n%s", stdout)
			}
			for _, want := range []string{"electd: the store " + url + " cannot be reached: ", "gave up after --timeout 3s"} {
				if !strings.Contains(stderr, want) {
					t.Fatalf("stderr does not say %q:\n%s", want, stderr)
				}
			}
			_ = el.Close()
			_ = st.Close()
		})
	}
}

// TestLeaderHolders: with a semaphore of 2 slots, `electd leader` lists
// both holders, in text and in JSON ("holders"), and keeps "leader".
func TestLeaderHolders(t *testing.T) {
	tests := []struct {
		name  string
		start func(t *testing.T) string
	}{
		{name: "etcd", start: func(t *testing.T) string { return "etcd://" + testenv.StartEtcd(t).Endpoint() }},
		{name: "redis", start: func(t *testing.T) string { return "redis://" + testenv.StartRedis(t).Addr() }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			url := tc.start(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			st, err := store.Open(ctx, store.Options{URL: url}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			tokens := map[string]uint64{}
			for _, id := range []string{"a", "b"} {
				el, err := st.NewElector(elector.Candidate{Election: "sem", ID: id, Slots: 2, Timing: elector.Timing{TTL: 2 * time.Second}})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = el.Close() })
				term, err := el.Campaign(ctx)
				if err != nil {
					t.Fatal(err)
				}
				tokens[id] = term.Token
			}
			r := runElectd(t, 30*time.Second, nil, "leader", "--store", url, "--election", "sem", "-o", "json")
			var out struct {
				Leader  *elector.Leader  `json:"leader"`
				Holders []elector.Leader `json:"holders"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || r.code != 0 {
				t.Fatalf("want exit 0 and JSON (%v):\n%s", err, r)
			}
			if out.Leader == nil || out.Leader.ID != "a" || len(out.Holders) != 2 ||
				out.Holders[0].Token != tokens["a"] || out.Holders[1].ID != "b" || out.Holders[1].Token != tokens["b"] {
				t.Fatalf("leader %+v, holders %+v; want a, then a and b with tokens %v", out.Leader, out.Holders, tokens)
			}
			r = runElectd(t, 30*time.Second, nil, "leader", "--store", url, "--election", "sem")
			if r.code != 0 || !strings.Contains(r.stdout, "sem: a token=") || !strings.Contains(r.stdout, "\nsem: b token=") {
				t.Fatalf("text output does not list both holders:\n%s", r)
			}
		})
	}
}

// TestLeaderUnreachable: `electd leader` on a store that does not answer
// within --timeout exits 69, as `status` and `lock` do, naming the store
// without its password (it exited 1 before).
func TestLeaderUnreachable(t *testing.T) {
	tests := []struct {
		name  string
		start func(t *testing.T) string
	}{
		{name: "etcd", start: func(t *testing.T) string {
			e := testenv.StartEtcd(t)
			e.Kill(t)
			return "etcd://u:leaderpw@" + e.Endpoint()
		}},
		{name: "redis", start: func(t *testing.T) string {
			r := testenv.StartRedis(t)
			r.Kill(t)
			return "redis://:leaderpw@" + r.Addr()
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			url := tc.start(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := electdCmd(ctx, t, nil, "leader", "--store", url, "--election", "u", "--timeout", "1s")
			var out, errb lockedBuffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			wantExit(t, cmd.Run(), exitNoStore, &errb)
			if s := errb.String(); !strings.Contains(s, "cannot be reached") || strings.Contains(s, "leaderpw") {
				t.Errorf("stderr does not say the store cannot be reached, or shows the password:\n%s", s)
			}
		})
	}
}
