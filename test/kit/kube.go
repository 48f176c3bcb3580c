package kit

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/electd/electd/elector/kube"
	"github.com/electd/electd/internal/testenv"
)

// kubeNamespace is where electd runs its elections, as a service account
// bound to nothing but electd's Role there (testenv.LeaseVerbs).
const kubeNamespace = "electd"

// kubeServers are a kube-apiserver (with its own etcd): electd reaches it
// through a kubeconfig ($KUBECONFIG) holding the token of a service
// account with the least-privilege Role, and the kit reads its Leases as
// the admin.
type kubeServers struct {
	servers
	k     *testenv.Kube
	token string

	mu    sync.Mutex
	files map[string]string // kubeconfig file by the server it names
	once  sync.Once
	cli   *kubernetes.Clientset
}

// newKube is the Servers of k, made by its entry with t. Kill and Start act
// on the apiserver; its etcd keeps the Leases.
func newKube(t testing.TB, k *testenv.Kube) *kubeServers {
	addr := strings.TrimPrefix(k.URL(), "https://")
	return &kubeServers{k: k, token: k.LeaseServiceAccount(t, kubeNamespace, "electd"), files: map[string]string{},
		servers: servers{value: k, srv: k, scheme: "k8s", url: "k8s://" + kubeNamespace, reach: Reach{Addrs: []string{addr}}, t: t}}
}

// Dial reaches the apiserver directly, or through the proxy at addrs[0]:
// the URL names the namespace, $KUBECONFIG the server and the token.
func (s *kubeServers) Dial(addrs []string) Dial {
	server := s.k.URL()
	if len(addrs) > 0 {
		server = "https://" + addrs[0]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.files[server]
	if !ok {
		f = s.kubeconfig(server)
		s.files[server] = f
	}
	return Dial{URL: s.url, Env: []string{"KUBECONFIG=" + f}}
}

func (s *kubeServers) client() *kubernetes.Clientset {
	s.once.Do(func() { s.cli = s.k.Client(s.t) })
	return s.cli
}

// Queued counts the election's tickets, and its holder when it has none.
func (s *kubeServers) Queued(t testing.TB, election string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	leases := s.client().CoordinationV1().Leases(kubeNamespace)
	list, err := leases.List(ctx, metav1.ListOptions{LabelSelector: "electd.io/queue=" + kube.LeaseName(election)})
	if err != nil {
		t.Fatalf("count candidates: %v", err)
	}
	holders := map[string]bool{}
	for _, l := range list.Items {
		if l.Spec.HolderIdentity != nil {
			holders[*l.Spec.HolderIdentity] = true
		}
	}
	n := len(list.Items)
	l, err := leases.Get(ctx, kube.LeaseName(election), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		t.Fatalf("read the Lease: %v", err)
	case l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" && !holders[*l.Spec.HolderIdentity]:
		n++
	}
	return n
}

// LastRun reads the run record of the election's run Lease (NAME.run).
func (s *kubeServers) LastRun(t testing.TB, election string) *RunRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	l, err := s.client().CoordinationV1().Leases(kubeNamespace).Get(ctx, kube.LeaseName(election)+".run", metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		t.Fatalf("read the run record: %v", err)
	}
	v, ok := l.Annotations["electd.io/run"]
	if !ok {
		return nil
	}
	return decodeRun(t, []byte(v))
}

// kubeconfig writes a kubeconfig for server with the service account's
// token and the CA inline, readable by every user: the suites run some
// electds as nobody.
func (s *kubeServers) kubeconfig(server string) string {
	s.t.Helper()
	ca, err := os.ReadFile(s.k.CAFile())
	if err != nil {
		s.t.Fatalf("read the apiserver's CA: %v", err)
	}
	q := strconv.Quote
	content := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: kit
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: kit
  user:
    token: %s
contexts:
- name: kit
  context: {cluster: kit, user: kit}
current-context: kit
`, q(server), q(base64.StdEncoding.EncodeToString(ca)), q(s.token))
	dir, err := os.MkdirTemp("", "electd-kubeconfig-")
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = os.RemoveAll(dir) })
	path := filepath.Join(dir, "kubeconfig")
	if err := os.Chmod(dir, 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		s.t.Fatal(err)
	}
	return path
}

// kubeShared is the k8s+client-go entry: kubeServers whose scenarios each
// get their election's Lease as a client-go elector leaves it, and hand
// it back to client-go after (Preparer).
type kubeShared struct{ *kubeServers }

// goLeads bounds how long a client-go elector (2 s lease, 200 ms retry
// period) takes to lead a Lease it may have to wait out.
const goLeads = 15 * time.Second

// Prepare has a client-go LeaderElector create election's Lease, lead and
// release it (ReleaseOnCancel), so that the scenario's electds start from
// client-go's record: holder cleared, client-go's acquireTime,
// leaseDurationSeconds 1, no electd annotation. The check it returns has
// a client-go elector lead the Lease again, within goLeads of the
// scenario's electds being killed: electd leaves a record client-go
// accepts, whatever the scenario did to it.
func (s *kubeShared) Prepare(t *testing.T, election string) (after func()) {
	t.Helper()
	lease := kube.LeaseName(election)
	s.goLead(t, lease, "client-go-before", true)
	return func() { t.Helper(); s.goLead(t, lease, "client-go-after", false) }
}

// goLead runs a client-go elector on lease until it leads, then stops it
// (releasing the Lease if release).
func (s *kubeShared) goLead(t *testing.T, lease, id string, release bool) {
	t.Helper()
	led := make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Name: lease, Namespace: kubeNamespace},
			Client:     s.client().CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: id},
		},
		LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 200 * time.Millisecond,
		ReleaseOnCancel: release, Name: id,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { close(led) },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		t.Fatalf("client-go elector: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); le.Run(ctx) }()
	defer func() { cancel(); <-done }()
	select {
	case <-led:
	case <-time.After(goLeads):
		t.Errorf("client-go elector %s did not lead the Lease %s/%s within %s", id, kubeNamespace, lease, goLeads)
	}
}
