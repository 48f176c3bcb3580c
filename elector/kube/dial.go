package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/backend"
)

// Backend is the Kubernetes backend as the store package lists it:
// k8s://[NAMESPACE], the API server and credentials from $KUBECONFIG or
// the pod's service account.
var Backend = backend.Backend{
	Name:            "kubernetes",
	Schemes:         []backend.Scheme{{Name: "k8s"}},
	Form:            "k8s://[NAMESPACE]",
	About:           "a Lease on the Kubernetes API server",
	CredentialsFrom: "$KUBECONFIG (or ~/.kube/config), or the pod's service account",
	Parse:           parse,
	Refused:         Refused,
	PermissionHint:  "bind electd's service account to a Role granting get, list, watch, create, update and delete on leases.coordination.k8s.io in the namespace; see examples/kubernetes/rbac.yaml",
}

// parse reads k8s://[NAMESPACE]: an optional namespace, nothing else.
func parse(u backend.URL) (backend.Target, error) {
	ns := strings.TrimSuffix(u.Rest, "/")
	if ns != "" {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return backend.Target{}, elector.Configf("store", "%s: k8s://[NAMESPACE] takes a namespace and nothing else (no user, password, port or path; the API server and credentials come from $KUBECONFIG or the pod's service account): %q %s",
				u.Redacted, ns, errs[0])
		}
	}
	return backend.Target{Dial: func(_ context.Context, s backend.Settings) (backend.Conn, error) {
		rc, namespace, err := LoadConfig(ns)
		if err != nil {
			return nil, err
		}
		leases, reviews, err := Clients(rc)
		if err != nil {
			return nil, err
		}
		if s.Logger != nil {
			s.Logger.Debug("kubernetes API server", "host", rc.Host, "namespace", namespace)
		}
		return &Conn{Leases: leases, Reviews: reviews, Namespace: namespace}, nil
	}}, nil
}

// Verbs are the verbs on leases.coordination.k8s.io electd needs in its
// namespace: the election's Lease is read, watched, created and updated;
// each waiter's ticket is created, updated and deleted; and delete
// removes a ticket that its owner left behind.
var Verbs = []string{"get", "list", "watch", "create", "update", "delete"}

// Role is the least-privilege Role, for messages and docs.
const Role = `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: electd}
rules:
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, list, watch, create, update, delete]`

// LoadConfig finds the API server and the credentials as kubectl does:
// $KUBECONFIG (or ~/.kube/config), else the pod's service account. It
// returns the namespace to use: namespace when not empty, else the
// kubeconfig context's, else the pod's own, else "default".
func LoadConfig(namespace string) (*rest.Config, string, error) {
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), &clientcmd.ConfigOverrides{})
	rc, err := cc.ClientConfig()
	if err != nil {
		return nil, "", elector.Configf("store", "k8s:// finds no API server: neither $KUBECONFIG (or ~/.kube/config) nor a pod's service account gives one (%v); set KUBECONFIG, or run electd in a pod", err)
	}
	if namespace == "" {
		ns, _, err := cc.Namespace()
		if err != nil || ns == "" {
			ns = "default"
		}
		namespace = ns
	}
	return rc, namespace, nil
}

// Conn is an open connection to the API server for one namespace.
type Conn struct {
	Leases    LeasesGetter
	Reviews   AccessReviews
	Namespace string

	checked atomic.Bool // the access reviews passed once
}

// NewElector validates c and returns a candidate on the namespace's Leases.
func (c *Conn) NewElector(cand elector.Candidate) (elector.Locker, error) {
	return New(Config{Candidate: cand, Leases: c.Leases, Namespace: c.Namespace})
}

// Ping asks the API server, one review per verb, whether the credentials
// may do what electd needs on Leases in the namespace; a verb RBAC does
// not allow is a permanent error naming it. Once that check has passed,
// Ping (/healthz's) is one list of at most one Lease.
func (c *Conn) Ping(ctx context.Context) error {
	if c.checked.Load() {
		_, err := c.Leases.Leases(c.Namespace).List(ctx, metav1.ListOptions{Limit: 1})
		return classify(err)
	}
	if err := c.check(ctx); err != nil {
		return err
	}
	c.checked.Store(true)
	return nil
}

// check makes the access reviews of Ping.
func (c *Conn) check(ctx context.Context) error {
	var missing []string
	for _, verb := range Verbs {
		r, err := c.Reviews.Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: c.Namespace, Verb: verb, Group: "coordination.k8s.io", Resource: "leases"}},
		}, metav1.CreateOptions{})
		if err != nil {
			return classify(err)
		}
		if !r.Status.Allowed {
			missing = append(missing, verb)
		}
	}
	if len(missing) > 0 {
		return &permanentError{&rbacError{verbs: missing, namespace: c.Namespace}}
	}
	return nil
}

// Close releases nothing: the HTTP transport is shared and idle
// connections close by themselves.
func (c *Conn) Close() error { return nil }

// rbacError names the verbs RBAC refuses.
type rbacError struct {
	verbs     []string
	namespace string
}

func (e *rbacError) Error() string {
	return fmt.Sprintf("RBAC does not allow %s on leases.coordination.k8s.io in namespace %q; bind this Role to electd's service account:\n%s",
		strings.Join(e.verbs, ", "), e.namespace, Role)
}

// Refused classifies an error for store/: the credentials refused, or a
// verb RBAC does not allow.
func Refused(err error) backend.Refusal {
	var r *rbacError
	switch {
	case apierrors.IsUnauthorized(err):
		return backend.RefusedLogin
	case errors.As(err, &r), apierrors.IsForbidden(err):
		return backend.RefusedPermission
	}
	return backend.NotRefused
}
