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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

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
