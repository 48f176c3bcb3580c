package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/internal/testenv"
)

// leakSecret has characters that must be escaped in a URL, so that both
// its raw and its escaped forms are looked for.
const leakSecret = "Zq9-pa/ss@w?rd#x"

// TestNoCredentialLeak runs `electd run` (debug logs) and `electd leader`
// with a password-bearing store and collects everything they print and
// serve, and the child's environment and command line: the password must
// appear nowhere.
func TestNoCredentialLeak(t *testing.T) {
	escaped := strings.TrimPrefix(url.UserPassword("u", leakSecret).String(), "u:")
	tests := []struct {
		name  string
		start func(t *testing.T) (env, args []string) // store set-up; env and flags that reach it
	}{
		{"etcd TLS, password in $ELECTD_STORE", func(t *testing.T) ([]string, []string) {
			ca := testenv.NewCA(t, "ca")
			e := testenv.StartEtcdTLS(t, ca)
			e.EnableAuth(t, "root-"+leakSecret)
			e.AddUser(t, "electd", leakSecret, "/electd/")
			kp := ca.Client(t, "nobody")
			store := strings.Replace(e.URL(), "://", "://electd:"+escaped+"@", 1)
			return []string{"ELECTD_STORE=" + store},
				[]string{"--ca-file", ca.CertFile, "--cert-file", kp.CertFile, "--key-file", kp.KeyFile}
		}},
		{"etcd, password in --store, JSON logs", func(t *testing.T) ([]string, []string) {
			e := testenv.StartEtcd(t)
			e.EnableAuth(t, "root-"+leakSecret)
			e.AddUser(t, "electd", leakSecret, "/electd/")
			return nil, []string{"--store", strings.Replace(e.URL(), "://", "://electd:"+escaped+"@", 1), "--log-format", "json"}
		}},
		{"redis TLS ACL, $ELECTD_STORE_PASSWORD", func(t *testing.T) ([]string, []string) {
			ca := testenv.NewCA(t, "ca")
			r := testenv.StartRedisWith(t, testenv.RedisOptions{CA: ca, ClientCertAuth: true,
				Users: []testenv.RedisUser{{Name: "electd", Password: leakSecret}}})
			kp := ca.Client(t, "electd")
			return []string{"ELECTD_STORE_PASSWORD=" + leakSecret, "ELECTD_STORE=" + strings.Replace(r.URL(), "://", "://electd@", 1)},
				[]string{"--ca-file", ca.CertFile, "--cert-file", kp.CertFile, "--key-file", kp.KeyFile}
		}},
		{"zookeeper TLS digest, password in $ELECTD_STORE", func(t *testing.T) ([]string, []string) {
			ca := testenv.NewCA(t, "ca")
			z := testenv.StartZKWith(t, testenv.ZKOptions{CA: ca, ClientCertAuth: true})
			kp := ca.Client(t, "electd")
			return []string{"ELECTD_STORE=" + strings.Replace(z.URL(), "://", "://electd:"+escaped+"@", 1)},
				[]string{"--ca-file", ca.CertFile, "--cert-file", kp.CertFile, "--key-file", kp.KeyFile}
		}},
		{"redis, default user's password from a file", func(t *testing.T) ([]string, []string) {
			r := testenv.StartRedisWith(t, testenv.RedisOptions{Users: []testenv.RedisUser{{Name: "electd", Password: leakSecret}}})
			pw := testenv.WriteFile(t, "pw", leakSecret+"\n")
			return nil, []string{"--store", strings.Replace(r.URL(), "://", "://electd@", 1), "--store-password-file", pw}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env, storeArgs := tc.start(t)
			var seen bytes.Buffer // everything collected
			collect := func(what, s string) {
				fmt.Fprintf(&seen, "==== %s\n%s\n", what, s)
			}
			collectRun(t, env, storeArgs, collect)
			for _, s := range []string{leakSecret, escaped, url.QueryEscape(leakSecret)} {
				if i := strings.Index(seen.String(), s); i >= 0 {
					t.Errorf("the password (as %q) appears in what electd printed or served:\n%s", s,
						seen.String()[max(0, i-300):min(seen.Len(), i+100)])
				}
			}
			if t.Failed() || testing.Verbose() {
				t.Logf("collected %d bytes:\n%s", seen.Len(), seen.String())
			}
		})
	}
}

// collectRun runs `electd run` with a child until it leads, collects its
// HTTP answers, the child's environment and command line, resigns once,
// stops it with SIGTERM, and collects its output.
func collectRun(t *testing.T, env, storeArgs []string, collect func(what, s string)) {
	t.Helper()
	main := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	admin := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	args := append([]string{"run", "--election", "leak", "--id", "node-1", "--ttl", "3s", "--log-level", "debug",
		"--listen", main, "--admin-listen", admin, "--advertise", "http://node-1:8080"}, storeArgs...)
	args = append(args, "--", "sleep", "600")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := electdCmd(ctx, t, env, args...)
	var out, errb lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatalf("start electd run: %v", err)
	}
	defer func() {
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
		err := cmd.Wait()
		collect("electd run stdout", out.String())
		collect("electd run stderr", errb.String())
		if err != nil {
			t.Errorf("electd run after SIGTERM: %v (want exit 0)\n%s", err, errb.String())
		}
		if !strings.Contains(errb.String(), "DEBUG") {
			t.Errorf("no debug lines in electd's log:\n%s", errb.String())
		}
	}()

	// waitReady waits until this copy is ready and /leader names it.
	waitReady := func() {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			ready, _ := httpGet(t, "http://"+main+"/readyz")
			known, _ := httpGet(t, "http://"+main+"/leader")
			if ready == http.StatusOK && known == http.StatusOK {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("electd did not become ready:\n%s", errb.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitReady()
	for _, p := range []string{"/leader", "/readyz", "/livez", "/healthz", "/status", "/metrics"} {
		code, body := httpGet(t, "http://"+main+p)
		collect("GET "+p, fmt.Sprintf("%d %s", code, body))
	}
	if code, body := httpGet(t, "http://"+admin+"/metrics"); code != http.StatusOK || !strings.Contains(body, "electd_is_leader") {
		t.Errorf("admin /metrics = %d, want 200 with electd_is_leader", code)
	} else {
		collect("GET admin /metrics", body)
	}
	collect("GET /leader/watch", firstEvent(t, "http://"+main+"/leader/watch"))

	child := childOf(t, cmd.Process.Pid)
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", child)); err == nil && strings.HasPrefix(string(b), "electd-init") {
		// Under pidns and userns electd's child is the namespace init,
		// whose environment is empty; the command is the init's child.
		initEnv, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", child))
		if err != nil {
			t.Fatalf("the namespace init's environment: %v", err)
		}
		collect("namespace init environ", strings.ReplaceAll(string(initEnv), "\x00", "\n"))
		child = childOf(t, child)
	}
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", child))
	if err != nil {
		t.Fatalf("child's environment: %v", err)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", child))
	if err != nil {
		t.Fatalf("child's command line: %v", err)
	}
	vars := strings.Split(string(environ), "\x00")
	collect("child environ", strings.Join(vars, "\n"))
	collect("child cmdline", strings.ReplaceAll(string(cmdline), "\x00", " "))
	var electdVars []string
	for _, v := range vars {
		if strings.HasPrefix(v, "ELECTD_") {
			electdVars = append(electdVars, strings.SplitN(v, "=", 2)[0])
		}
	}
	want := "ELECTD_ELECTION ELECTD_ID ELECTD_FENCING_TOKEN ELECTD_LEADER_SINCE"
	if got := strings.Join(electdVars, " "); !sameWords(got, want) {
		t.Errorf("child's ELECTD_ variables = %s, want %s", got, want)
	}

	for _, format := range []string{"text", "json"} {
		args := append([]string{"leader", "--election", "leak", "--log-level", "debug", "-o", format}, storeArgs...)
		r := runElectd(t, 30*time.Second, env, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "node-1") {
			t.Errorf("electd leader -o %s: want exit 0 naming node-1:\n%s", format, r)
		}
		collect("electd leader -o "+format, r.String())
	}

	code, body := httpPost(t, "http://"+admin+"/resign")
	collect("POST admin /resign", fmt.Sprintf("%d %s", code, body))
	if code != http.StatusOK {
		t.Errorf("POST /resign on the admin listener = %d %s, want 200", code, body)
	}
	waitReady()
}

func sameWords(a, b string) bool {
	x, y := strings.Fields(a), strings.Fields(b)
	if len(x) != len(y) {
		return false
	}
	set := map[string]int{}
	for _, w := range x {
		set[w]++
	}
	for _, w := range y {
		set[w]--
	}
	for _, n := range set {
		if n != 0 {
			return false
		}
	}
	return true
}

// childOf returns the one child process of pid. Each thread lists its own
// children (electd starts the child from a locked thread): read them all.
func childOf(t *testing.T, pid int) int {
	t.Helper()
	files, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	if err != nil || len(files) == 0 {
		t.Fatalf("threads of %d: %v", pid, err)
	}
	var kids []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended
		}
		kids = append(kids, strings.Fields(string(b))...)
	}
	if len(kids) != 1 {
		t.Fatalf("children of %d: %q, want one", pid, kids)
	}
	child, err := strconv.Atoi(kids[0])
	if err != nil {
		t.Fatal(err)
	}
	return child
}

func httpGet(t *testing.T, u string) (int, string) {
	t.Helper()
	return httpDo(t, http.MethodGet, u, "")
}

func httpPost(t *testing.T, u string) (int, string) {
	t.Helper()
	return httpDo(t, http.MethodPost, u, "")
}

// httpDo makes one request, with "Authorization: auth" unless auth is
// empty, and returns the status and body (0 and the error if it failed).
func httpDo(t *testing.T, method, u, auth string) (int, string) {
	t.Helper()
	resp, cancel, err := send(t, method, u, auth)
	defer cancel()
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// send makes one request bounded by 5 s; the caller closes the body, then
// calls cancel.
func send(t *testing.T, method, u, auth string) (*http.Response, context.CancelFunc, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	return resp, cancel, err
}

// firstEvent returns the first data line of a Server-Sent Events stream.
func firstEvent(t *testing.T, u string) string {
	t.Helper()
	resp, cancel, err := send(t, http.MethodGet, u, "")
	defer cancel()
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") {
			return sc.Text()
		}
	}
	t.Errorf("GET %s: no event: %v", u, sc.Err())
	return ""
}
