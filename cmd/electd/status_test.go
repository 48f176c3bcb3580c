package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/faultproxy"
	"github.com/electd/electd/internal/testenv"
	"github.com/electd/electd/status"
	"github.com/electd/electd/store"
)

// TestStatus: `electd status` shows the queue (a holding with its token,
// b waiting behind it), the term and the --once-per record, as text and
// JSON; once the store is gone (for redlock, a majority of it) it says so
// and exits 69.
func TestStatus(t *testing.T) {
	tests := append(killableStores(),
		killableStore{name: "redlock", start: func(t *testing.T) (string, func()) {
			rs := []*testenv.Redis{testenv.StartRedis(t), testenv.StartRedis(t), testenv.StartRedis(t)}
			// Two of three gone: no majority answers.
			return "redlock://" + rs[0].Addr() + "," + rs[1].Addr() + "," + rs[2].Addr(), func() { rs[0].Kill(t); rs[1].Kill(t) }
		}},
		killableStore{name: "kube", start: func(t *testing.T) (string, func()) {
			k := testenv.StartKube(t)
			p := faultproxy.Start(t, strings.TrimPrefix(k.URL(), "https://"))
			// The copies below and electd status all find it by $KUBECONFIG.
			t.Setenv("KUBECONFIG", k.KubeconfigVia(t, "https://"+p.Addr(), k.AdminToken(), "default"))
			return "k8s://", p.Cut
		}},
	)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			url, kill := tc.start(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			st, err := store.Open(ctx, store.Options{URL: url}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			cand := func(id string) elector.Locker {
				el, err := st.NewElector(elector.Candidate{Election: "s", ID: id, Address: "http://" + id + ":80",
					Timing: elector.Timing{TTL: 2 * time.Second}})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = el.Close() })
				return el
			}
			a, b := cand("a"), cand("b")
			ra := electortest.MustLead(t, electortest.Campaign(ctx, a), 10*time.Second, "a")
			cb := electortest.Campaign(ctx, b)
			rec := elector.RunRecord{ID: "a", Token: ra.Term.Token, Started: time.Now(), Finished: time.Now(), Expires: time.Now().Add(time.Hour)}
			if err := a.RecordRun(ctx, rec, time.Hour); err != nil {
				t.Fatal(err)
			}
			var rep status.Report
			electortest.Eventually(t, 10*time.Second, "status to show a holding and b waiting", func() bool {
				r := runElectd(t, 30*time.Second, nil, "status", "--store", url, "--election", "s", "-o", "json")
				if r.code != 0 {
					t.Fatalf("want exit 0:\n%s", r)
				}
				rep = status.Report{}
				if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
					t.Fatalf("stdout is not a report: %v\n%s", err, r.stdout)
				}
				return len(rep.Queue) == 2 && rep.Queue[1].ID == "b"
			})
			l := rep.Queue
			if !rep.Store.Reachable || l[0].ID != "a" || !l[0].Holder || l[0].Token != ra.Term.Token || l[0].Address != "http://a:80" ||
				l[1].Holder || len(rep.Holders) != 1 || rep.Holders[0].FencingToken != ra.Term.Token ||
				rep.LastRun == nil || rep.LastRun.ID != "a" || rep.LastRun.ExpiresInSeconds < 3500 {
				t.Fatalf("report %+v", rep)
			}
			r := runElectd(t, 30*time.Second, nil, "status", "--store", url, "--election", "s")
			for _, want := range []string{"(reachable)", "term      a token=", "  1  a ", "holder", "  2  b ", "waiting", "last run  a token="} {
				if r.code != 0 || !strings.Contains(r.stdout, want) {
					t.Fatalf("text output lacks %q:\n%s", want, r)
				}
			}
			t.Logf("electd status:\n%s", r.stdout)
			electortest.StillWaiting(t, cb, "b")
			kill()
			r = runElectd(t, 30*time.Second, nil, "status", "--store", url, "--election", "s", "-o", "json", "--timeout", "3s")
			if r.code != exitNoStore || !strings.Contains(r.stderr, "cannot be reached") || !strings.Contains(r.stdout, `"reachable":false`) {
				t.Fatalf("with the store gone: want exit %d, \"cannot be reached\" and a report saying so:\n%s", exitNoStore, r)
			}
		})
	}
}

// TestRunServesStatus: `electd run --slots 2` wires GET /status and the
// holders of GET /leader: with three copies, every copy's /status shows
// the line of three, the first two holding, and /leader lists both.
func TestRunServesStatus(t *testing.T) {
	url := "etcd://" + testenv.StartEtcd(t).Endpoint()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var listens []string
	for i, id := range []string{"n1", "n2", "n3"} {
		listen := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
		listens = append(listens, listen)
		cmd := electdCmd(ctx, t, nil, "run", "--store", url, "--election", "web", "--id", id, "--slots", "2",
			"--ttl", "3s", "--listen", listen, "--advertise", "http://"+id)
		var errb lockedBuffer
		cmd.Stderr = &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
			_ = cmd.Wait()
		})
		// Each joins after the one before it has queued.
		electortest.Eventually(t, 30*time.Second, id+" queued", func() bool {
			code, body := httpGet(t, "http://"+listen+"/status")
			var rep status.Report
			return code == http.StatusOK && json.Unmarshal([]byte(body), &rep) == nil && len(rep.Queue) == i+1
		})
	}
	var rep status.Report
	electortest.Eventually(t, 30*time.Second, "n1 and n2 holding, n3 waiting", func() bool {
		_, body := httpGet(t, "http://"+listens[2]+"/status")
		rep = status.Report{}
		if json.Unmarshal([]byte(body), &rep) != nil || len(rep.Queue) != 3 {
			return false
		}
		l := rep.Queue
		return rep.Slots == 2 && l[0].ID == "n1" && l[0].Holder && l[1].ID == "n2" && l[1].Holder && l[2].ID == "n3" && !l[2].Holder
	})
	code, body := httpGet(t, "http://"+listens[2]+"/leader")
	var doc struct {
		Leader  struct{ ID string }   `json:"leader"`
		Holders []struct{ ID string } `json:"holders"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil || code != http.StatusOK || doc.Leader.ID != "n1" ||
		len(doc.Holders) != 2 || doc.Holders[0].ID != "n1" || doc.Holders[1].ID != "n2" {
		t.Fatalf("GET /leader = %d %s; want n1 leading, holders n1 and n2", code, body)
	}
}
