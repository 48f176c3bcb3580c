package kube

import (
	"context"
	"fmt"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// The backend's client is its own, over client-go's rest package, and
// knows two API groups: coordination.k8s.io/v1 (Leases) and
// authorization.k8s.io/v1 (SelfSubjectAccessReviews). client-go's typed
// clients (k8s.io/client-go/kubernetes/typed/...) import
// k8s.io/client-go/kubernetes/scheme, which registers every built-in API
// group, and those groups doubled electd's binary.

// LeasesGetter gives the client of a namespace's Leases. Clients builds
// one.
type LeasesGetter interface {
	Leases(namespace string) LeaseClient
}

// LeaseClient is what the backend calls on one namespace's Leases: the
// methods of client-go's typed LeaseInterface it uses, with the same
// signatures (so a client-go LeaseInterface is one), and errors that
// k8s.io/apimachinery/pkg/api/errors classifies.
type LeaseClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	List(ctx context.Context, opts metav1.ListOptions) (*coordinationv1.LeaseList, error)
	// Watch's events carry a *coordinationv1.Lease (Added, Modified,
	// Deleted, Bookmark) or a *metav1.Status (Error).
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// AccessReviews creates SelfSubjectAccessReviews, for Conn.Ping's check
// (client-go's typed SelfSubjectAccessReviewInterface is one).
type AccessReviews interface {
	Create(ctx context.Context, review *authorizationv1.SelfSubjectAccessReview, opts metav1.CreateOptions) (*authorizationv1.SelfSubjectAccessReview, error)
}

// scheme knows the two groups' types and meta/v1's (options, Status,
// watch events); params encodes the options as query parameters.
var (
	scheme = newScheme()
	codecs = serializer.NewCodecFactory(scheme)
	params = runtime.NewParameterCodec(scheme)
)

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	utilruntime.Must(coordinationv1.AddToScheme(s))
	utilruntime.Must(authorizationv1.AddToScheme(s))
	return s
}

// Clients returns the Lease and access-review clients of rc, without
// client-side throttling: a renewal must never wait in a local queue.
// The two share one HTTP client.
func Clients(rc *rest.Config) (LeasesGetter, AccessReviews, error) {
	rc = rest.CopyConfig(rc)
	rc.RateLimiter = flowcontrol.NewFakeAlwaysRateLimiter()
	rc.UserAgent = "electd"
	h, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes client: %w", err)
	}
	group := func(gv schema.GroupVersion) (*rest.RESTClient, error) {
		c := rest.CopyConfig(rc)
		c.GroupVersion = &gv
		c.APIPath = "/apis"
		// As client-go's generated clients set it: the codecs, or with
		// CBOR when client-go's ClientsAllowCBOR feature gate is on.
		c.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(scheme, codecs).WithoutConversion()
		rcl, err := rest.RESTClientForConfigAndClient(c, h)
		if err != nil {
			return nil, fmt.Errorf("kubernetes client: %w", err)
		}
		return rcl, nil
	}
	coord, err := group(coordinationv1.SchemeGroupVersion)
	if err != nil {
		return nil, nil, err
	}
	auth, err := group(authorizationv1.SchemeGroupVersion)
	if err != nil {
		return nil, nil, err
	}
	return leaseGroup{coord}, accessReviews{auth}, nil
}

// leaseGroup is the coordination.k8s.io/v1 client.
type leaseGroup struct{ c *rest.RESTClient }

func (g leaseGroup) Leases(namespace string) LeaseClient { return leases{g.c, namespace} }

// leases makes the requests client-go's typed Lease client makes:
// protobuf preferred, JSON accepted.
type leases struct {
	c  *rest.RESTClient
	ns string
}

func (l leases) req(r *rest.Request) *rest.Request {
	return r.UseProtobufAsDefault().NamespaceIfScoped(l.ns, l.ns != "").Resource("leases")
}

func (l leases) Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := l.req(l.c.Get()).Name(name).VersionedParams(&opts, params).Do(ctx).Into(out)
	return out, err
}

func (l leases) List(ctx context.Context, opts metav1.ListOptions) (*coordinationv1.LeaseList, error) {
	out := &coordinationv1.LeaseList{}
	err := l.req(l.c.Get()).VersionedParams(&opts, params).Timeout(timeout(opts)).Do(ctx).Into(out)
	return out, err
}

func (l leases) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return l.req(l.c.Get()).VersionedParams(&opts, params).Timeout(timeout(opts)).Watch(ctx)
}

func (l leases) Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := l.req(l.c.Post()).VersionedParams(&opts, params).Body(lease).Do(ctx).Into(out)
	return out, err
}

func (l leases) Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := l.req(l.c.Put()).Name(lease.Name).VersionedParams(&opts, params).Body(lease).Do(ctx).Into(out)
	return out, err
}

func (l leases) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return l.req(l.c.Delete()).Name(name).Body(&opts).Do(ctx).Error()
}

// timeout is a list's or watch's TimeoutSeconds, 0 for none.
func timeout(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*opts.TimeoutSeconds) * time.Second
}

// accessReviews is the authorization.k8s.io/v1 client.
type accessReviews struct{ c *rest.RESTClient }

func (a accessReviews) Create(ctx context.Context, review *authorizationv1.SelfSubjectAccessReview, opts metav1.CreateOptions) (*authorizationv1.SelfSubjectAccessReview, error) {
	out := &authorizationv1.SelfSubjectAccessReview{}
	err := a.c.Post().UseProtobufAsDefault().Resource("selfsubjectaccessreviews").VersionedParams(&opts, params).Body(review).Do(ctx).Into(out)
	return out, err
}
