package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/electd/electd/internal/testenv"
)

// kubeDoc is one document of a manifest, decoded into its Kubernetes type.
type kubeDoc[T any] struct {
	where string // file#index kind/name
	obj   *T
}

// kubeManifests are the documents of examples/kubernetes.
type kubeManifests struct {
	deployments     []kubeDoc[appsv1.Deployment]
	services        []kubeDoc[corev1.Service]
	serviceAccounts []kubeDoc[corev1.ServiceAccount]
	roles           []kubeDoc[rbacv1.Role]
	bindings        []kubeDoc[rbacv1.RoleBinding]
	budgets         []kubeDoc[policyv1.PodDisruptionBudget]
}

// The values the downward API and the Secrets give in the checks below.
const (
	examplePodName = "api-6c9f7b8d5-4xkzq"
	examplePodIP   = "10.244.1.7"
	exampleSecret  = "0123456789abcdef0123456789abcdef" // an admin token: at least 16 characters
)

// strictKube decodes doc into a T, refusing fields T does not have (a
// misspelt or misplaced key would otherwise be dropped without a word).
func strictKube[T any](t *testing.T, where string, doc []byte) *T {
	t.Helper()
	var obj T
	if err := yaml.UnmarshalStrict(doc, &obj); err != nil {
		t.Errorf("%s: %v", where, err)
		return nil
	}
	return &obj
}

// readKubeManifests decodes every document of dir/*.yaml into its type:
// the kinds the examples use, each at its API version.
func readKubeManifests(t *testing.T, dir string) *kubeManifests {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", dir, err)
	}
	m := &kubeManifests{}
	for _, f := range files {
		r := k8syaml.NewYAMLReader(bufio.NewReader(bytes.NewReader([]byte(readFile(t, f)))))
		for i := 0; ; i++ {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			var raw map[string]any
			if err := yaml.Unmarshal(doc, &raw); err != nil {
				t.Fatalf("%s#%d: %v", filepath.Base(f), i, err)
			}
			if raw == nil {
				continue // comments only
			}
			var head struct {
				metav1.TypeMeta `json:",inline"`
				Metadata        metav1.ObjectMeta `json:"metadata"`
			}
			if err := yaml.Unmarshal(doc, &head); err != nil {
				t.Fatalf("%s#%d: %v", filepath.Base(f), i, err)
			}
			where := filepath.Base(f) + "#" + toString(i) + " " + head.Kind + "/" + head.Metadata.Name
			if head.Metadata.Name == "" {
				t.Errorf("%s: needs metadata.name", where)
			}
			if head.Metadata.Namespace != "" {
				t.Errorf("%s: names namespace %q; leave it to `kubectl apply -n`, so that one namespace holds the pods, their Role and their Leases", where, head.Metadata.Namespace)
			}
			switch head.APIVersion + " " + head.Kind {
			case "apps/v1 Deployment":
				m.deployments = append(m.deployments, kubeDoc[appsv1.Deployment]{where, strictKube[appsv1.Deployment](t, where, doc)})
			case "v1 Service":
				m.services = append(m.services, kubeDoc[corev1.Service]{where, strictKube[corev1.Service](t, where, doc)})
			case "v1 ServiceAccount":
				m.serviceAccounts = append(m.serviceAccounts, kubeDoc[corev1.ServiceAccount]{where, strictKube[corev1.ServiceAccount](t, where, doc)})
			case "rbac.authorization.k8s.io/v1 Role":
				m.roles = append(m.roles, kubeDoc[rbacv1.Role]{where, strictKube[rbacv1.Role](t, where, doc)})
			case "rbac.authorization.k8s.io/v1 RoleBinding":
				m.bindings = append(m.bindings, kubeDoc[rbacv1.RoleBinding]{where, strictKube[rbacv1.RoleBinding](t, where, doc)})
			case "policy/v1 PodDisruptionBudget":
				m.budgets = append(m.budgets, kubeDoc[policyv1.PodDisruptionBudget]{where, strictKube[policyv1.PodDisruptionBudget](t, where, doc)})
			default:
				t.Errorf("%s: apiVersion %q kind %q is not one this check knows; add it to readKubeManifests", where, head.APIVersion, head.Kind)
			}
		}
	}
	return m
}

// checkKubernetes checks examples/kubernetes: every document decodes into
// its type; each electd container's flags and variables exist and pass
// electd's own checks, on k8s:// (no etcd, no Redis) with an id from the
// pod's name; the pod runs as a service account bound to the
// least-privilege Role; it has time to stop; a Deployment whose pods are
// Ready only on the leader can roll out; and Services and budgets select
// the pods of a Deployment.
func checkKubernetes(t *testing.T, dir string) {
	m := readKubeManifests(t, dir)
	electds := 0
	for _, d := range m.deployments {
		if d.obj == nil {
			continue
		}
		pod := d.obj.Spec.Template.Spec
		for _, c := range pod.Containers {
			args, ok := electdArgs(c)
			if !ok {
				continue
			}
			electds++
			where := d.where + " container " + c.Name
			t.Run(d.obj.Name+"/"+c.Name, func(t *testing.T) { checkElectdContainer(t, m, where, d.obj, c, args) })
		}
	}
	checkKubeRoles(t, m)
	if electds != 2 {
		t.Errorf("found %d electd containers, want 2 (active-passive and singleton-worker)", electds)
	}
	for _, s := range m.services {
		if s.obj == nil {
			continue
		}
		pod := selectedPod(m, s.obj.Spec.Selector)
		if pod == nil {
			t.Errorf("%s: its selector %v selects no Deployment's pods", s.where, s.obj.Spec.Selector)
			continue
		}
		for _, p := range s.obj.Spec.Ports {
			if p.TargetPort.Type == intstr.String && !podHasPort(pod, p.TargetPort.StrVal) {
				t.Errorf("%s: targetPort %q names no container port of the pods it selects", s.where, p.TargetPort.StrVal)
			}
		}
	}
	for _, b := range m.budgets {
		if b.obj == nil {
			continue
		}
		if sel := b.obj.Spec.Selector; sel == nil || selectedPod(m, sel.MatchLabels) == nil {
			t.Errorf("%s: its selector selects no Deployment's pods", b.where)
		}
	}
	readme := readFile(t, filepath.Join(dir, "README.md"))
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	for _, f := range files {
		if !strings.Contains(readme, "`"+filepath.Base(f)+"`") {
			t.Errorf("README.md does not list %s", filepath.Base(f))
		}
	}
}

// electdArgs returns the arguments of `electd …` in container c: electd as
// its command, or an electd image run with arguments only.
func electdArgs(c corev1.Container) ([]string, bool) {
	switch {
	case len(c.Command) > 0 && strings.HasSuffix(c.Command[0], "/electd"):
		return append(slices.Clone(c.Command[1:]), c.Args...), true
	case strings.HasPrefix(c.Image, "electd:") && len(c.Command) == 0:
		return slices.Clone(c.Args), true
	}
	return nil, false
}

func checkElectdContainer(t *testing.T, m *kubeManifests, where string, dep *appsv1.Deployment, c corev1.Container, args []string) {
	pod := dep.Spec.Template.Spec
	listen := checkRunArgs(t, where, args)
	var names []string
	for _, e := range c.Env {
		names = append(names, e.Name)
	}
	checkEnvNames(t, where, names)
	port := ""
	for _, p := range c.Ports {
		if p.Name == "electd" {
			port = toString(p.ContainerPort)
		}
	}
	if listen == "" || !strings.HasSuffix(listen, ":"+port) {
		t.Errorf("%s: --listen %q does not match the electd port %s", where, listen, port)
	}
	path := map[string]string{}
	for name, probe := range map[string]*corev1.Probe{"readinessProbe": c.ReadinessProbe, "livenessProbe": c.LivenessProbe} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Port.String() != "electd" {
			t.Errorf("%s: %s must be an httpGet on the electd port", where, name)
			continue
		}
		path[name] = probe.HTTPGet.Path
	}
	if p := path["readinessProbe"]; p != "/readyz" && p != "/livez" {
		t.Errorf("%s: readiness on %q: /readyz (Ready on the leader only) or /livez (every pod Ready)", where, p)
	}
	if p := path["livenessProbe"]; p != "/livez" {
		t.Errorf("%s: liveness on %q, want /livez: it does not depend on leadership or the store, so followers are not restarted", where, p)
	}

	env := resolveKubeEnv(t, where, c.Env)
	if env["ELECTD_ID"] != examplePodName {
		t.Errorf("%s: $ELECTD_ID is %q: give it the pod's name from the downward API (fieldRef metadata.name), unique and what `kubectl get lease` shows", where, env["ELECTD_ID"])
	}
	command := false
	if i := slices.Index(args, "--"); i >= 0 {
		command = i+1 < len(args)
		args = args[:i] // COMMAND is not on this machine
	}
	rc, store, err := parseExampleRun(t, args, env)
	if err != nil {
		t.Errorf("%s: electd refuses its settings: %v", where, err)
		return
	}
	// The rules of elector/kube (Config.validate), which runs later, on dial.
	if !strings.HasPrefix(store, "k8s://") {
		t.Errorf("%s: store %q: the examples run on the Kubernetes API server alone (k8s://), with no etcd or Redis", where, store)
	}
	if rc.timing.TTL%time.Second != 0 {
		t.Errorf("%s: --ttl %s: a Lease counts whole seconds", where, rc.timing.TTL)
	}
	if rc.cand.Slots > 1 {
		t.Errorf("%s: --slots %d: k8s:// has no semaphores", where, rc.cand.Slots)
	}
	// SIGTERM: stop the child (--stop-timeout, then SIGKILL), then resign,
	// bounded by a renewal interval and a second (supervisor's give).
	need := rc.timing.RenewInterval + time.Second
	if command {
		need += rc.sup.StopTimeout
	}
	grace := 30 * time.Second // Kubernetes' default
	if pod.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
	}
	if grace <= need {
		t.Errorf("%s: terminationGracePeriodSeconds %s, but electd may need %s to stop its child and resign: the kubelet's SIGKILL would cut that short", where, grace, need)
	}
	if path["readinessProbe"] == "/readyz" && !allMayBeUnavailable(dep) {
		t.Errorf("%s: only the leader's pod is Ready (/readyz), so a rollout that keeps any pod available never ends: new pods cannot become Ready while an old one leads; use maxUnavailable: 100%% or Recreate (README.md, \"Rolling updates\")", where)
	}
	checkKubeRBAC(t, m, where, pod.ServiceAccountName)
}

// kubeVarRef is a $(VAR) reference in an EnvVar's value.
var kubeVarRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// resolveKubeEnv gives the container's variables the values the kubelet
// would: $(VAR) of a variable defined before it, the downward API's pod
// name and IP, and a Secret's value.
func resolveKubeEnv(t *testing.T, where string, vars []corev1.EnvVar) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, v := range vars {
		switch {
		case v.ValueFrom == nil:
			val := kubeVarRef.ReplaceAllStringFunc(v.Value, func(ref string) string {
				if x, ok := env[ref[2:len(ref)-1]]; ok {
					return x
				}
				return ref // the kubelet leaves an unknown reference as it is
			})
			if strings.Contains(val, "$(") {
				t.Errorf("%s: %s=%q refers to a variable not defined before it", where, v.Name, v.Value)
			}
			env[v.Name] = val
		case v.ValueFrom.FieldRef != nil:
			val, ok := map[string]string{"metadata.name": examplePodName, "status.podIP": examplePodIP}[v.ValueFrom.FieldRef.FieldPath]
			if !ok {
				t.Errorf("%s: %s from field %s: add it to resolveKubeEnv", where, v.Name, v.ValueFrom.FieldRef.FieldPath)
			}
			env[v.Name] = val
		case v.ValueFrom.SecretKeyRef != nil:
			env[v.Name] = exampleSecret
		default:
			t.Errorf("%s: %s: a source resolveKubeEnv does not know", where, v.Name)
		}
	}
	return env
}

// parseExampleRun parses `electd ARGS` as electd would, with env as its
// only ELECTD_* variables, and runs the checks of `electd run` that come
// before it opens the store.
func parseExampleRun(t *testing.T, args []string, env map[string]string) (rc *runConfig, store string, err error) {
	t.Helper()
	_, electdVars := runFlagSet()
	for name := range electdVars {
		t.Setenv(name, "") // restored at the end of the test
		_ = os.Unsetenv(name)
	}
	for k, v := range env {
		if strings.HasPrefix(k, "ELECTD_") {
			t.Setenv(k, v)
		}
	}
	app := &cli.App{Name: "electd", ExitErrHandler: func(*cli.Context, error) {}, Writer: io.Discard, ErrWriter: io.Discard,
		Commands: []*cli.Command{{Name: "run", Flags: runFlags(), Action: func(c *cli.Context) error {
			store = c.String("store")
			rc, err = parseRunConfig(c)
			return err
		}}}}
	if aerr := app.Run(append([]string{"electd"}, args...)); err == nil && aerr != nil {
		err = aerr
	}
	if err == nil && rc == nil {
		err = errors.New("`electd run` did not run")
	}
	return rc, store, err
}

// allMayBeUnavailable reports whether dep's rollout may take every old pod
// down before a new one is Ready: Recreate, or maxUnavailable (rounded
// down, as the Deployment controller does) of all replicas.
func allMayBeUnavailable(dep *appsv1.Deployment) bool {
	if dep.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		return true
	}
	replicas := 1
	if dep.Spec.Replicas != nil {
		replicas = int(*dep.Spec.Replicas)
	}
	mu := intstr.FromString("25%") // the default
	if ru := dep.Spec.Strategy.RollingUpdate; ru != nil && ru.MaxUnavailable != nil {
		mu = *ru.MaxUnavailable
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(&mu, replicas, false)
	return err == nil && n >= replicas
}

// checkKubeRBAC checks that the service account sa is defined here and
// bound to a Role defined here (checkKubeRoles checks its rules).
func checkKubeRBAC(t *testing.T, m *kubeManifests, where, sa string) {
	if sa == "" || sa == "default" {
		t.Errorf("%s: the pod runs as the namespace's default service account; give it rbac.yaml's (serviceAccountName)", where)
		return
	}
	if !slices.ContainsFunc(m.serviceAccounts, func(d kubeDoc[corev1.ServiceAccount]) bool { return d.obj != nil && d.obj.Name == sa }) {
		t.Errorf("%s: service account %q is not defined here", where, sa)
	}
	bound := slices.ContainsFunc(m.bindings, func(b kubeDoc[rbacv1.RoleBinding]) bool {
		return b.obj != nil && b.obj.RoleRef.Kind == "Role" && b.obj.RoleRef.APIGroup == rbacv1.GroupName &&
			slices.ContainsFunc(m.roles, func(r kubeDoc[rbacv1.Role]) bool { return r.obj != nil && r.obj.Name == b.obj.RoleRef.Name }) &&
			slices.ContainsFunc(b.obj.Subjects, func(s rbacv1.Subject) bool { return s.Kind == rbacv1.ServiceAccountKind && s.Name == sa })
	})
	if !bound {
		t.Errorf("%s: no RoleBinding here binds service account %q to a Role defined here (a Role of the namespace, not a ClusterRole: the least privilege)", where, sa)
	}
}

// checkKubeRoles checks that every Role here grants electd's verbs on
// Leases and nothing else (elector/kube's tests check rbac.yaml against
// kube.Role itself).
func checkKubeRoles(t *testing.T, m *kubeManifests) {
	want := rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: testenv.LeaseVerbs}
	for _, role := range m.roles {
		if role.obj == nil {
			continue
		}
		rules := role.obj.Rules
		if len(rules) != 1 || !slices.Equal(rules[0].APIGroups, want.APIGroups) || !slices.Equal(rules[0].Resources, want.Resources) ||
			!sameSet(rules[0].Verbs, want.Verbs) || len(rules[0].ResourceNames) > 0 || len(rules[0].NonResourceURLs) > 0 {
			t.Errorf("%s: rules %+v, want exactly %+v (elector/kube.Role)", role.where, rules, want)
		}
	}
	for _, b := range m.bindings {
		if b.obj != nil && b.obj.RoleRef.Kind != "Role" {
			t.Errorf("%s: binds %s %q: a Role of the namespace is the least privilege", b.where, b.obj.RoleRef.Kind, b.obj.RoleRef.Name)
		}
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// selectedPod is the pod template of the first Deployment whose pods carry
// every label of sel; nil if none.
func selectedPod(m *kubeManifests, sel map[string]string) *corev1.PodSpec {
	if len(sel) == 0 {
		return nil
	}
	for _, d := range m.deployments {
		if d.obj == nil {
			continue
		}
		labels := d.obj.Spec.Template.Labels
		match := true
		for k, v := range sel {
			if labels[k] != v {
				match = false
			}
		}
		if match {
			return &d.obj.Spec.Template.Spec
		}
	}
	return nil
}

func podHasPort(pod *corev1.PodSpec, name string) bool {
	for _, c := range pod.Containers {
		for _, p := range c.Ports {
			if p.Name == name {
				return true
			}
		}
	}
	return false
}
