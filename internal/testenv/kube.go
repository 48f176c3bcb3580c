package testenv

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const kubeHow = "run `make kube-apiserver` in the module root (it builds test/servers/kube-apiserver into bin/)"

const (
	// kubeReady bounds a kube-apiserver's start: it is ready (/readyz) in a
	// few seconds here, longer on a loaded machine.
	kubeReady = 90 * time.Second
	// kubeAdmin is the static token user StartKube makes admin.
	kubeAdmin = "electd-admin"
	// kubeTokenTTL is the lifetime asked for LeaseServiceAccount's token:
	// longer than any test run.
	kubeTokenTTL = 24 * time.Hour
	// kubeContext names the cluster, user and context of a Kubeconfig.
	kubeContext = "electd-test"
)

// LeaseVerbs are the verbs LeaseServiceAccount's Role grants on
// coordination.k8s.io leases, and no others: the least privilege electd's
// Kubernetes backend needs (elector/kube.Verbs: delete removes a waiter's
// ticket; it never patches).
var LeaseVerbs = []string{"get", "list", "watch", "create", "update", "delete"}

// Kube is a kube-apiserver run as a child process, backed by an etcd of its
// own, with static token authentication and RBAC authorization, serving
// HTTPS on a free loopback port. Its certificate comes from a CA of the
// test (CAFile); its admin's token (AdminToken) is in group
// system:masters. ServiceAccount tokens are signed with a key kept across
// restarts.
//
// Stop, Kill, Start and Restart act on the kube-apiserver alone: a restart
// keeps its port, its certificate, its tokens and its etcd, and so every
// object. Etcd returns its etcd, to restart or kill. Measured on 2 busy
// shared cores: ready (etcd included) about 3 s after the start, about
// 280 MB RSS; Stop drains for about 1 s, so Restart takes about 3 s; its
// etcd's Restart takes about 5 s (etcd drains the apiserver's watches
// first, see Etcd); Kill is immediate.
type Kube struct {
	lifecycle
	etcd       *Etcd
	port       int
	dir        string
	ca         *CA
	serving    KeyPair
	adminToken string
	tokenFile  string
	saKeyFile  string
}

// StartKube starts an etcd and a kube-apiserver on free loopback ports and
// waits until the apiserver's /readyz answers 200 to the admin. Both are
// killed in t.Cleanup (the apiserver first). A missing kube-apiserver binary
// skips the test (fails it when $CI is set); see the package doc.
func StartKube(t testing.TB) *Kube {
	t.Helper()
	var candidates []string
	if root, err := ModuleRoot(); err == nil {
		candidates = append(candidates, filepath.Join(root, "bin", "kube-apiserver"))
	}
	bin := binary(t, "ELECTD_KUBE_APISERVER_BIN", "kube-apiserver", candidates, kubeHow)
	// As the etcd cluster's members: an fsync of every Lease write on the
	// 2-core CI machine, with every suite's servers on it, is what a
	// renewal would wait for, and a 2 s term allows it about 1 s.
	etcd := startEtcd(t, nil, true)
	dir := t.TempDir()
	k := &Kube{
		etcd:       etcd,
		dir:        dir,
		ca:         NewCA(t, "electd test kube-apiserver CA"),
		adminToken: randomToken(t),
		tokenFile:  filepath.Join(dir, "tokens.csv"),
		saKeyFile:  filepath.Join(dir, "service-account.key"),
	}
	k.serving = k.ca.Server(t, "kube-apiserver")
	// token,user,uid,"group1,group2": the format of --token-auth-file.
	tokens := fmt.Sprintf("%s,%s,%s,\"system:masters\"\n", k.adminToken, kubeAdmin, kubeAdmin)
	if err := os.WriteFile(k.tokenFile, []byte(tokens), 0o600); err != nil {
		t.Fatalf("testenv: kube-apiserver token file: %v", err)
	}
	writeServiceAccountKey(t, k.saKeyFile)
	if err := os.MkdirAll(filepath.Join(dir, "certs"), 0o700); err != nil {
		t.Fatalf("testenv: kube-apiserver cert dir: %v", err)
	}
	k.srv = &server{
		name:    "kube-apiserver",
		bin:     bin,
		logPath: filepath.Join(dir, "kube-apiserver.log"),
		args:    k.args,
		probe:   k.probe,
		ready:   kubeReady,
	}
	t.Cleanup(func() { k.srv.cleanup(t) }) // before the etcd's (LIFO)
	firstStart(t, k.srv, func() error {
		port, err := freePort()
		k.port = port
		return err
	})
	return k
}

// URL returns the server's address, "https://127.0.0.1:PORT".
func (k *Kube) URL() string { return "https://127.0.0.1:" + strconv.Itoa(k.port) }

// CAFile returns the PEM file of the CA that signed the server's certificate.
func (k *Kube) CAFile() string { return k.ca.CertFile }

// AdminToken returns a bearer token of a user in group system:masters.
func (k *Kube) AdminToken() string { return k.adminToken }

// Etcd returns the apiserver's own etcd: restarting or killing it is how a
// test takes the storage away from under a running apiserver.
func (k *Kube) Etcd() *Etcd { return k.etcd }

// Config returns a client configuration of the server for a bearer token,
// without client-side rate limiting.
func (k *Kube) Config(token string) *rest.Config {
	return &rest.Config{
		Host:            k.URL(),
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: k.CAFile()},
		QPS:             -1, // no client-side throttling: the tests pace themselves
		UserAgent:       "electd-testenv",
	}
}

// Client returns a clientset of the admin. Its idle connections are closed
// in t.Cleanup.
func (k *Kube) Client(t testing.TB) *kubernetes.Clientset {
	t.Helper()
	return k.ClientAs(t, k.adminToken)
}

// ClientAs returns a clientset that presents token. Its idle connections are
// closed in t.Cleanup.
func (k *Kube) ClientAs(t testing.TB, token string) *kubernetes.Clientset {
	t.Helper()
	cfg := k.Config(token)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatalf("testenv: kube client: %v", err)
	}
	cs, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		t.Fatalf("testenv: kube client: %v", err)
	}
	t.Cleanup(hc.CloseIdleConnections)
	return cs
}

// Kubeconfig writes a kubeconfig file whose current context reaches the
// server with token (and the CA by its path), and returns its path: what
// $KUBECONFIG names. Its context sets no namespace.
func (k *Kube) Kubeconfig(t testing.TB, token string) string {
	t.Helper()
	return k.KubeconfigNamespace(t, token, "")
}

// KubeconfigNamespace is Kubeconfig with the context's namespace set (none
// when namespace is empty).
func (k *Kube) KubeconfigNamespace(t testing.TB, token, namespace string) string {
	t.Helper()
	return k.KubeconfigVia(t, k.URL(), token, namespace)
}

// KubeconfigVia is KubeconfigNamespace reaching the server at server
// (https://HOST:PORT), such as a proxy in front of it on 127.0.0.1, which
// the server's certificate names.
func (k *Kube) KubeconfigVia(t testing.TB, server, token, namespace string) string {
	t.Helper()
	var ns string
	if namespace != "" {
		ns = "\n    namespace: " + strconv.Quote(namespace)
	}
	// JSON strings are YAML strings: strconv.Quote keeps every value literal.
	q := strconv.Quote
	content := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: %[1]s
  cluster:
    server: %[2]s
    certificate-authority: %[3]s
users:
- name: %[1]s
  user:
    token: %[4]s
contexts:
- name: %[1]s
  context:
    cluster: %[1]s
    user: %[1]s%[5]s
current-context: %[1]s
`, kubeContext, q(server), q(k.CAFile()), q(token), ns)
	return WriteFile(t, "kubeconfig", content)
}

// LeaseServiceAccount creates, as the admin, the namespace (if missing), a
// ServiceAccount name in it, a Role name+"-leases" that grants verbs
// (LeaseVerbs when none are given) on coordination.k8s.io leases in that
// namespace and nothing else, and a
// RoleBinding of the same name to the ServiceAccount; it returns a token of
// the ServiceAccount (TokenRequest, valid for a day). It returns once the
// token can list leases, so the binding is in force. Objects that exist
// already are kept.
func (k *Kube) LeaseServiceAccount(t testing.TB, namespace, name string, verbs ...string) string {
	t.Helper()
	if len(verbs) == 0 {
		verbs = LeaseVerbs
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := k.Client(t)
	role := name + "-leases"
	create := func(what string, err error) {
		t.Helper()
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("testenv: create %s: %v", what, err)
		}
	}
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: namespace},
	}, metav1.CreateOptions{})
	create("namespace "+namespace, err)
	_, err = cs.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}, metav1.CreateOptions{})
	create("service account "+namespace+"/"+name, err)
	_, err = cs.RbacV1().Roles(namespace).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: role},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"coordination.k8s.io"},
			Resources: []string{"leases"},
			Verbs:     verbs,
		}},
	}, metav1.CreateOptions{})
	create("role "+namespace+"/"+role, err)
	_, err = cs.RbacV1().RoleBindings(namespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: namespace}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role},
	}, metav1.CreateOptions{})
	create("role binding "+namespace+"/"+role, err)
	ttl := int64(kubeTokenTTL / time.Second)
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &ttl},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("testenv: token of service account %s/%s: %v", namespace, name, err)
	}
	token := tr.Status.Token
	// The authorizer reads RBAC objects from a cache: wait until it has them.
	sa := k.ClientAs(t, token)
	for {
		_, err := sa.CoordinationV1().Leases(namespace).List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil {
			return token
		}
		select {
		case <-ctx.Done():
			t.Fatalf("testenv: service account %s/%s cannot list leases: %v", namespace, name, err)
		case <-time.After(pollInterval):
		}
	}
}

func (k *Kube) args() []string {
	return []string{
		"--etcd-servers", "http://" + k.etcd.Endpoint(),
		"--bind-address", "127.0.0.1",
		"--advertise-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(k.port),
		"--cert-dir", filepath.Join(k.dir, "certs"), // unused with --tls-cert-file; not /var/run/kubernetes
		"--tls-cert-file", k.serving.CertFile,
		"--tls-private-key-file", k.serving.KeyFile,
		"--token-auth-file", k.tokenFile,
		"--authorization-mode", "RBAC",
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", k.saKeyFile,
		"--service-account-signing-key-file", k.saKeyFile,
		"--service-cluster-ip-range", "10.0.0.0/24",
		"--endpoint-reconciler-type", "none", // no endpoints for the kubernetes Service on loopback
		"--enable-priority-and-fairness=false",
	}
}

// probe succeeds when /readyz answers 200 to the admin token, which no
// other apiserver on the port would accept.
func (k *Kube) probe(int) error {
	tlsCfg := &tls.Config{RootCAs: k.ca.Pool(), MinVersion: tls.VersionTLS12}
	if _, err := httpDoAs(tlsCfg, "GET", k.URL()+"/readyz", "", k.adminToken); err != nil {
		return fmt.Errorf("kube-apiserver readyz: %w", err)
	}
	return nil
}

// randomToken returns 32 random bytes in hex.
func randomToken(t testing.TB) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("testenv: random token: %v", err)
	}
	return hex.EncodeToString(b)
}

// writeServiceAccountKey writes an ECDSA P-256 private key (SEC 1 PEM, "EC
// PRIVATE KEY": --service-account-key-file reads no PKCS #8): the apiserver
// signs ServiceAccount tokens with it and checks them with its public half.
func writeServiceAccountKey(t testing.TB, path string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testenv: service account key: %v", err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatalf("testenv: service account key: %v", err)
	}
	writePEM(t, path, "EC PRIVATE KEY", der)
}
