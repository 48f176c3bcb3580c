package testenv

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func TestKube(t *testing.T) {
	begin := time.Now()
	k := StartKube(t)
	t.Logf("etcd and kube-apiserver ready in %v; apiserver RSS %s", time.Since(begin).Round(time.Millisecond), rss(k.Pid()))
	if !strings.HasPrefix(k.URL(), "https://127.0.0.1:") {
		t.Fatalf("URL() = %q, want https://127.0.0.1:PORT", k.URL())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin := k.Client(t)
	if v, err := admin.Discovery().ServerVersion(); err != nil {
		t.Fatalf("server version: %v", err)
	} else {
		t.Logf("kube-apiserver %s", v.GitVersion)
	}

	// Optimistic concurrency: an update that carries a stale
	// resourceVersion is refused with 409 Conflict.
	leases := admin.CoordinationV1().Leases("default")
	first, err := leases.Create(ctx, lease("testenv", "a"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create lease: %v", err)
	}
	next := first.DeepCopy()
	next.Spec.HolderIdentity = ptr("b")
	if _, err := leases.Update(ctx, next, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update lease: %v", err)
	}
	stale := first.DeepCopy()
	stale.Spec.HolderIdentity = ptr("c")
	if _, err := leases.Update(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("update with stale resourceVersion %s: err = %v, want 409 Conflict", first.ResourceVersion, err)
	}
	expectHolder(ctx, t, admin, "default", "testenv", "b")

	// Least privilege: leases in its namespace, nothing else.
	token := k.LeaseServiceAccount(t, "electd", "candidate")
	sa := k.ClientAs(t, token)
	mine, err := sa.CoordinationV1().Leases("electd").Create(ctx, lease("sa", "x"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("service account: create lease: %v", err)
	}
	mine.Spec.HolderIdentity = ptr("y")
	if _, err := sa.CoordinationV1().Leases("electd").Update(ctx, mine, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("service account: update lease: %v", err)
	}
	expectHolder(ctx, t, sa, "electd", "sa", "y")
	if _, err := sa.CoreV1().Pods("electd").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("service account: list pods: err = %v, want 403 Forbidden", err)
	}
	if _, err := sa.CoordinationV1().Leases("default").Get(ctx, "testenv", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("service account: lease in another namespace: err = %v, want 403 Forbidden", err)
	}
	if _, err := sa.CoordinationV1().Leases("electd").Patch(ctx, "sa", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("service account: patch lease: err = %v, want 403 Forbidden (patch is not granted)", err)
	}
	if token2 := k.LeaseServiceAccount(t, "electd", "candidate"); token2 == "" {
		t.Fatal("LeaseServiceAccount again: empty token") // objects kept, a new token
	}

	// A kubeconfig file, read as client-go reads $KUBECONFIG.
	path := k.KubeconfigNamespace(t, token, "electd")
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: path}, &clientcmd.ConfigOverrides{})
	if ns, _, err := loader.Namespace(); err != nil || ns != "electd" {
		t.Fatalf("kubeconfig %s: namespace %q, %v; want electd", path, ns, err)
	}
	cfg, err := loader.ClientConfig()
	if err != nil {
		t.Fatalf("kubeconfig %s: %v", path, err)
	}
	expectHolder(ctx, t, kubernetes.NewForConfigOrDie(cfg), "electd", "sa", "y")
	if cfg, err := clientcmd.BuildConfigFromFlags("", k.Kubeconfig(t, k.AdminToken())); err != nil {
		t.Fatalf("admin kubeconfig: %v", err)
	} else {
		expectHolder(ctx, t, kubernetes.NewForConfigOrDie(cfg), "default", "testenv", "b")
	}

	// A restart keeps the port, the tokens and every object.
	url, pid := k.URL(), k.Pid()
	begin = time.Now()
	k.Restart(t)
	t.Logf("kube-apiserver restarted in %v", time.Since(begin).Round(time.Millisecond))
	if k.URL() != url || k.Pid() == pid || k.Pid() == 0 {
		t.Fatalf("after restart: %s pid %d, want %s and a new pid (was %d)", k.URL(), k.Pid(), url, pid)
	}
	expectHolder(ctx, t, admin, "default", "testenv", "b")
	expectHolder(ctx, t, sa, "electd", "sa", "y")

	// Its etcd restarted, then killed and started: the apiserver
	// reconnects, and acknowledged writes survive.
	begin = time.Now()
	k.Etcd().Restart(t)
	t.Logf("etcd restarted in %v", time.Since(begin).Round(time.Millisecond))
	expectHolder(ctx, t, admin, "default", "testenv", "b")
	k.Etcd().Kill(t)
	k.Etcd().Start(t)
	expectHolder(ctx, t, sa, "electd", "sa", "y")
	t.Logf("apiserver RSS at the end %s", rss(k.Pid()))

	begin = time.Now()
	k.Stop(t)
	t.Logf("kube-apiserver stopped in %v", time.Since(begin).Round(time.Millisecond))
	if k.Pid() != 0 {
		t.Fatalf("Pid() = %d after Stop, want 0", k.Pid())
	}
}

func TestKubeMissingBinary(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("ELECTD_KUBE_APISERVER_BIN", "") // `make test` sets it
	t.Setenv("CI", "true")
	f := runFake(func(tb testing.TB) { binary(tb, "ELECTD_KUBE_APISERVER_BIN", "kube-apiserver", nil, kubeHow) })
	if !strings.Contains(f.fatal, "make kube-apiserver") {
		t.Errorf("with CI: fatal=%q skipped=%q, want a failure naming make kube-apiserver", f.fatal, f.skipped)
	}
}

func lease(name, holder string) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr(holder),
			LeaseDurationSeconds: ptr(int32(15)),
		},
	}
}

// expectHolder reads the lease, retrying while the server (or its etcd)
// comes back, and checks its holder.
func expectHolder(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name, want string) {
	t.Helper()
	for {
		l, err := cs.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			if got := l.Spec.HolderIdentity; got == nil || *got != want {
				t.Fatalf("lease %s/%s: holder %v, want %q", ns, name, got, want)
			}
			return
		}
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || ctx.Err() != nil {
			t.Fatalf("lease %s/%s: %v", ns, name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func ptr[T any](v T) *T { return &v }

// rss returns a process's resident set size as /proc says it.
func rss(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return "unknown"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
