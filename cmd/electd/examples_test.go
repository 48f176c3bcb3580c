package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	yaml "go.yaml.in/yaml/v2"

	"github.com/electd/electd/health"
	"github.com/electd/electd/internal/testenv"
	"github.com/electd/electd/store"
)

// TestExamples checks the deployment files that cannot run here (no Docker
// engine, no cluster, no Prometheus): they parse, every `electd run` flag and
// ELECTD_* variable they use exists, probes and checks point at electd's
// port, and alert rules use metrics electd exports.
func TestExamples(t *testing.T) {
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	file := func(rel string) string { return filepath.Join(root, filepath.FromSlash(rel)) }
	t.Run("compose", func(t *testing.T) { checkCompose(t, file("examples/compose")) })
	t.Run("kubernetes", func(t *testing.T) { checkKubernetes(t, file("examples/kubernetes")) })
	t.Run("systemd", func(t *testing.T) { checkSystemd(t, file("deploy/systemd/electd@.service")) })
	t.Run("prometheus", func(t *testing.T) { checkAlerts(t, file("deploy/prometheus/alerts.yml")) })
	t.Run("dockerfiles", func(t *testing.T) {
		for _, p := range []string{file("Dockerfile"), file("examples/compose/Dockerfile")} {
			b := readFile(t, p)
			for _, want := range []string{"CGO_ENABLED=0", "USER 65532:65532", `ENTRYPOINT ["/usr/local/bin/electd"]`, "distroless/static"} {
				if !strings.Contains(b, want) {
					t.Errorf("%s lacks %q", p, want)
				}
			}
		}
	})
}

// runFlagSet returns the names and aliases of `electd run`'s flags and the
// ELECTD_* variables they read, plus those of the secrets themselves
// ($ELECTD_STORE_PASSWORD, and the backends' own: store.SecretFlags).
func runFlagSet() (flags, envs map[string]bool) {
	flags, envs = map[string]bool{}, map[string]bool{"ELECTD_STORE_PASSWORD": true}
	for _, s := range store.SecretFlags() {
		envs[s.Env] = true
	}
	for _, f := range runFlags() {
		for _, n := range f.Names() {
			flags[n] = true
		}
		if ev, ok := f.(interface{ GetEnvVars() []string }); ok {
			for _, e := range ev.GetEnvVars() {
				envs[e] = true
			}
		}
	}
	flags["help"] = true
	return flags, envs
}

// checkRunArgs checks the flags of `electd run ARGS` (before "--") and
// returns the value of --listen, or "" when not given.
func checkRunArgs(t *testing.T, where string, args []string) (listen string) {
	t.Helper()
	flags, _ := runFlagSet()
	if len(args) == 0 || args[0] != "run" {
		t.Errorf("%s: %q is not `electd run …`", where, args)
		return ""
	}
	for i := 1; i < len(args) && args[i] != "--"; i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || strings.HasPrefix(a, "$") {
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !flags[name] {
			t.Errorf("%s: electd run has no flag --%s (see electd run --help)", where, name)
		}
		if name == "listen" {
			switch {
			case hasVal:
				listen = val
			case i+1 < len(args):
				listen = args[i+1]
			}
		}
	}
	return listen
}

func checkEnvNames(t *testing.T, where string, names []string) {
	t.Helper()
	_, envs := runFlagSet()
	for _, n := range names {
		if strings.HasPrefix(n, "ELECTD_") && !envs[n] {
			t.Errorf("%s: electd reads no variable %s", where, n)
		}
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// yamlDocs parses every document of a YAML file.
func yamlDocs(t *testing.T, p string) []map[string]any {
	t.Helper()
	dec := yaml.NewDecoder(strings.NewReader(readFile(t, p)))
	var docs []map[string]any
	for {
		var m map[any]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if m != nil {
			docs = append(docs, stringKeys(m).(map[string]any))
		}
	}
}

// stringKeys turns yaml.v2's map[any]any into map[string]any, recursively.
func stringKeys(v any) any {
	switch v := v.(type) {
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[toString(k)] = stringKeys(x)
		}
		return out
	case []any:
		for i := range v {
			v[i] = stringKeys(v[i])
		}
		return v
	default:
		return v
	}
}

func toString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := yaml.Marshal(v)
	return strings.TrimSpace(string(b))
}

func strs(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		out = append(out, toString(x))
	}
	return out
}

func mapOf(v any) map[string]any { m, _ := v.(map[string]any); return m }

func checkCompose(t *testing.T, dir string) {
	docs := yamlDocs(t, filepath.Join(dir, "docker-compose.yml"))
	if len(docs) != 1 {
		t.Fatalf("docker-compose.yml: %d documents, want 1", len(docs))
	}
	services := mapOf(docs[0]["services"])
	var sidecars []string
	for name, s := range services {
		svc := mapOf(s)
		for _, dep := range strs(svc["depends_on"]) {
			if services[dep] == nil {
				t.Errorf("service %s depends on unknown service %s", name, dep)
			}
		}
		if b := mapOf(svc["build"]); b != nil {
			df := filepath.Join(dir, toString(b["context"]), toString(b["dockerfile"]))
			if _, err := os.Stat(df); err != nil {
				t.Errorf("service %s: build file: %v", name, err)
			}
		}
		cmd := strs(svc["command"])
		if len(cmd) == 0 || cmd[0] != "run" {
			continue
		}
		sidecars = append(sidecars, name)
		if listen := checkRunArgs(t, "service "+name, cmd); listen != ":4040" {
			t.Errorf("service %s: --listen %q, want :4040 (HAProxy checks port 4040)", name, listen)
		}
		var names []string
		for k := range mapOf(svc["environment"]) {
			names = append(names, k)
		}
		checkEnvNames(t, "service "+name, names)
		if !slices.Contains(names, "ELECTD_ID") {
			t.Errorf("service %s: no ELECTD_ID; ids must differ", name)
		}
	}
	if len(sidecars) != 3 {
		t.Errorf("sidecars %q, want three", sidecars)
	}
	cfg := readFile(t, filepath.Join(dir, "haproxy.cfg"))
	for _, want := range []string{"uri /readyz", "expect status 200", "port 4040"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("haproxy.cfg lacks %q", want)
		}
	}
	servers := regexp.MustCompile(`(?m)^\s*server (\S+) (\S+):8080 check`).FindAllStringSubmatch(cfg, -1)
	var got []string
	for _, s := range servers {
		if services[s[2]] == nil {
			t.Errorf("haproxy.cfg: server %s points at unknown service %s", s[1], s[2])
		}
		got = append(got, s[2])
	}
	slices.Sort(got)
	slices.Sort(sidecars)
	if !slices.Equal(got, sidecars) {
		t.Errorf("haproxy.cfg servers %q, want the sidecars %q", got, sidecars)
	}
	if _, err := exec.LookPath("haproxy"); err == nil {
		out, err := exec.Command("haproxy", "-c", "-f", filepath.Join(dir, "haproxy.cfg")).CombinedOutput()
		if err != nil && !bytes.Contains(out, []byte("could not resolve address")) {
			t.Errorf("haproxy -c: %v\n%s", err, out)
		}
	}
}

func checkSystemd(t *testing.T, p string) {
	unit := readFile(t, p)
	var execStart string
	var envs []string
	set := map[string]string{}
	for _, line := range strings.Split(unit, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		set[k] = v
		switch k {
		case "ExecStart":
			execStart = v
		case "Environment":
			name, _, _ := strings.Cut(v, "=")
			envs = append(envs, name)
		}
	}
	f := strings.Fields(execStart)
	if len(f) < 2 || f[0] != "/usr/local/bin/electd" {
		t.Fatalf("ExecStart %q: want /usr/local/bin/electd run …", execStart)
	}
	checkRunArgs(t, "ExecStart", f[1:])
	checkEnvNames(t, "unit", envs)
	// electd notifies (sdnotify) and stops its child's tree itself.
	for k, want := range map[string]string{"Type": "notify", "NotifyAccess": "main", "KillMode": "mixed"} {
		if set[k] != want {
			t.Errorf("%s=%s, want %s", k, set[k], want)
		}
	}
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Log("systemd-analyze not found; unit syntax not verified")
		return
	}
	dir := t.TempDir()
	inst := filepath.Join(dir, "electd@check.service")
	if err := os.WriteFile(inst, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command("systemd-analyze", "verify", "--man=no", inst).CombinedOutput()
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" && !strings.Contains(l, "is not executable") {
			t.Errorf("systemd-analyze verify: %s", l)
		}
	}
}

func checkAlerts(t *testing.T, p string) {
	reg := prometheus.NewRegistry()
	if _, err := health.NewMetrics(reg, "e", nil); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, mf := range mfs {
		exported[mf.GetName()] = true
		if mf.GetType() == dto.MetricType_HISTOGRAM {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				exported[mf.GetName()+s] = true
			}
		}
	}
	docs := yamlDocs(t, p)
	if len(docs) != 1 {
		t.Fatalf("%s: %d documents, want 1", p, len(docs))
	}
	metric := regexp.MustCompile(`\belectd_[a-z_]+`)
	var alerts []string
	for _, g := range docs[0]["groups"].([]any) {
		for _, r := range mapOf(g)["rules"].([]any) {
			rule := mapOf(r)
			name := toString(rule["alert"])
			alerts = append(alerts, name)
			expr := toString(rule["expr"])
			if strings.Count(expr, "(") != strings.Count(expr, ")") {
				t.Errorf("%s: unbalanced parentheses in %q", name, expr)
			}
			used := metric.FindAllString(expr+" "+toString(mapOf(rule["annotations"])["description"]), -1)
			if len(used) == 0 {
				t.Errorf("%s: expression uses no electd metric", name)
			}
			for _, m := range used {
				if !exported[m] {
					t.Errorf("%s: electd exports no metric %s", name, m)
				}
			}
			if toString(mapOf(rule["labels"])["severity"]) == "" || toString(mapOf(rule["annotations"])["summary"]) == "" {
				t.Errorf("%s: needs labels.severity and annotations.summary", name)
			}
		}
	}
	for _, want := range []string{"ElectdNoLeader", "ElectdLeaderFlapping", "ElectdLeaseNearlyLapsed"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("no alert %s among %q", want, alerts)
		}
	}
}
