package kube_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/elector/kube"
	"github.com/electd/electd/internal/testenv"
)

// exampleRBAC is examples/kubernetes/rbac.yaml, decoded with unknown fields
// refused.
func exampleRBAC(t *testing.T) (*corev1.ServiceAccount, *rbacv1.Role, *rbacv1.RoleBinding) {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "examples", "kubernetes", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var sa *corev1.ServiceAccount
	var role *rbacv1.Role
	var binding *rbacv1.RoleBinding
	r := k8syaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var head metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &head); err != nil {
			t.Fatal(err)
		}
		var into any
		switch head.Kind {
		case "ServiceAccount":
			sa = &corev1.ServiceAccount{}
			into = sa
		case "Role":
			role = &rbacv1.Role{}
			into = role
		case "RoleBinding":
			binding = &rbacv1.RoleBinding{}
			into = binding
		default:
			t.Fatalf("rbac.yaml: unexpected kind %q", head.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, into); err != nil {
			t.Fatalf("rbac.yaml %s: %v", head.Kind, err)
		}
	}
	if sa == nil || role == nil || binding == nil {
		t.Fatal("rbac.yaml needs a ServiceAccount, a Role and a RoleBinding")
	}
	return sa, role, binding
}

// TestExampleRBAC: examples/kubernetes/rbac.yaml grants exactly Verbs on
// Leases, as Role (the text electd prints when a verb is missing) and the
// test environment's service accounts do; applied as it is to an API
// server, its service account passes electd's start check, leads and
// hands over.
func TestExampleRBAC(t *testing.T) {
	sa, role, binding := exampleRBAC(t)
	want := []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: kube.Verbs}}
	if !apiequality.Semantic.DeepEqual(role.Rules, want) {
		t.Errorf("rbac.yaml's Role rules %+v, want %+v (kube.Verbs)", role.Rules, want)
	}
	var printed rbacv1.Role
	if err := yaml.UnmarshalStrict([]byte(kube.Role), &printed); err != nil {
		t.Fatalf("kube.Role: %v", err)
	}
	if !apiequality.Semantic.DeepEqual(printed.Rules, want) {
		t.Errorf("kube.Role rules %+v, want %+v (kube.Verbs)", printed.Rules, want)
	}
	if !slices.Equal(testenv.LeaseVerbs, kube.Verbs) {
		t.Errorf("testenv.LeaseVerbs %q, kube.Verbs %q", testenv.LeaseVerbs, kube.Verbs)
	}
	if binding.RoleRef.Kind != "Role" || binding.RoleRef.Name != role.Name || len(binding.Subjects) != 1 ||
		binding.Subjects[0].Kind != rbacv1.ServiceAccountKind || binding.Subjects[0].Name != sa.Name {
		t.Errorf("rbac.yaml's RoleBinding %+v does not bind Role %q to service account %q", binding, role.Name, sa.Name)
	}
	if t.Failed() {
		return
	}

	k := testenv.StartKube(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := k.Client(t)
	const ns = "example-rbac"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ttl := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &ttl}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := conn(t, k, tr.Status.Token, ns)
	// The authorizer reads RBAC objects from a cache: the binding is in
	// force a moment after its creation.
	for {
		err := c.Ping(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the start check with rbac.yaml: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	a, b := lockerOn(t, c, "example", "a"), lockerOn(t, c, "example", "b")
	ra := electortest.MustLead(t, electortest.Campaign(ctx, a), 10*time.Second, "a")
	cb := electortest.Campaign(ctx, b)
	electortest.Eventually(t, 10*time.Second, "b in line", func() bool { return queued(t, k, ns, "example") == 2 })
	electortest.Resign(t, ra.Term)
	rb := electortest.MustLead(t, cb, 10*time.Second, "b")
	electortest.Resign(t, rb.Term)
}
