package kube

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	authv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	coordv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"

	"github.com/electd/electd/internal/testenv"
)

// client-go's typed clients have the methods the backend calls, with the
// same signatures.
var (
	_ LeaseClient   = coordv1.LeaseInterface(nil)
	_ AccessReviews = authv1.SelfSubjectAccessReviewInterface(nil)
)

// typedLeases is a LeasesGetter of client-go's typed client.
type typedLeases struct{ coordv1.LeasesGetter }

func (t typedLeases) Leases(ns string) LeaseClient { return t.LeasesGetter.Leases(ns) }

// contentTypes records the Content-Type of every answer.
type contentTypes struct {
	mu   sync.Mutex
	seen map[string]int
	rt   http.RoundTripper
}

func (c *contentTypes) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.rt.RoundTrip(r)
	if err == nil {
		c.mu.Lock()
		c.seen[strings.SplitN(resp.Header.Get("Content-Type"), ";", 2)[0]]++
		c.mu.Unlock()
	}
	return resp, err
}

// TestClient: the backend's own client (Clients) against an API server:
// each call the backend makes works, its errors are apierrors-classified,
// answers come as protobuf (as client-go's typed clients ask), and a
// watch delivers *coordinationv1.Lease events, bookmarks included, and
// *metav1.Status errors.
func TestClient(t *testing.T) {
	k := testenv.StartKube(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const ns = "default"

	ct := &contentTypes{seen: map[string]int{}}
	rc := k.Config(k.AdminToken())
	rc.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { ct.rt = rt; return ct }
	lg, reviews, err := Clients(rc)
	if err != nil {
		t.Fatal(err)
	}
	leases := lg.Leases(ns)

	if _, err := leases.Get(ctx, "client-test", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Get of a missing Lease: %v, want NotFound", err)
	}
	id := "a"
	l, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "client-test", Labels: map[string]string{"electd.io/client-test": "x"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &id}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if l.Name != "client-test" || l.ResourceVersion == "" || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != "a" {
		t.Fatalf("Create answered %+v", l)
	}
	if _, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "client-test"}}, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second Create: %v, want AlreadyExists", err)
	}
	stale := l.DeepCopy()
	id2 := "b"
	l.Spec.HolderIdentity = &id2
	l2, err := leases.Update(ctx, l, metav1.UpdateOptions{})
	if err != nil || *l2.Spec.HolderIdentity != "b" || l2.ResourceVersion == l.ResourceVersion {
		t.Fatalf("Update: %v, %+v", err, l2)
	}
	if _, err := leases.Update(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("Update from a stale resourceVersion: %v, want Conflict", err)
	}
	got, err := leases.Get(ctx, "client-test", metav1.GetOptions{})
	if err != nil || got.ResourceVersion != l2.ResourceVersion {
		t.Fatalf("Get: %v, %+v", err, got)
	}
	list, err := leases.List(ctx, metav1.ListOptions{LabelSelector: "electd.io/client-test=x"})
	if err != nil || len(list.Items) != 1 || list.Items[0].Name != "client-test" || list.ResourceVersion == "" {
		t.Fatalf("List: %v, %+v", err, list)
	}

	// A watch-list watch: the Lease (Added), then the bookmark that ends
	// the initial events; then a change (Modified).
	yes := true
	w, err := leases.Watch(ctx, metav1.ListOptions{LabelSelector: "electd.io/client-test=x", AllowWatchBookmarks: true,
		SendInitialEvents: &yes, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	next := func(want watch.EventType) *coordinationv1.Lease {
		t.Helper()
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch ended, want %s", want)
			}
			l, isLease := ev.Object.(*coordinationv1.Lease)
			if ev.Type != want || !isLease {
				t.Fatalf("watch event %s %T, want %s *coordinationv1.Lease", ev.Type, ev.Object, want)
			}
			return l
		case <-ctx.Done():
			t.Fatalf("no %s event", want)
		}
		return nil
	}
	if l := next(watch.Added); l.Name != "client-test" || *l.Spec.HolderIdentity != "b" {
		t.Fatalf("Added %+v", l)
	}
	if b := next(watch.Bookmark); b.Annotations[metav1.InitialEventsAnnotationKey] != "true" || b.ResourceVersion == "" {
		t.Fatalf("Bookmark %+v, want the end of the initial events", b)
	}
	l2.Spec.HolderIdentity = &id
	if _, err := leases.Update(ctx, l2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if l := next(watch.Modified); *l.Spec.HolderIdentity != "a" {
		t.Fatalf("Modified %+v", l)
	}
	if err := leases.Delete(ctx, "client-test", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	next(watch.Deleted)
	w.Stop()

	if err := leases.Delete(ctx, "client-test", metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Delete of a deleted Lease: %v, want NotFound", err)
	}

	r, err := reviews.Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "update", Group: "coordination.k8s.io", Resource: "leases"}}}, metav1.CreateOptions{})
	if err != nil || !r.Status.Allowed {
		t.Fatalf("the admin's access review: %v, %+v", err, r)
	}

	ct.mu.Lock()
	if ct.seen["application/vnd.kubernetes.protobuf"] == 0 || ct.seen["application/json"] != 0 {
		t.Errorf("answers by content type: %v, want protobuf only", ct.seen)
	}
	ct.mu.Unlock()

	// Refusals: a token the server does not know; a service account that
	// may only get Leases, in another namespace.
	bad, _, err := Clients(k.Config("not-a-token"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Leases(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Fatalf("List with an unknown token: %v, want Unauthorized", err)
	}
	sa, _, err := Clients(k.Config(k.LeaseServiceAccount(t, "client-test", "getter", "get", "list")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sa.Leases(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("List in a namespace of no Role: %v, want Forbidden", err)
	}
	if _, err := sa.Leases("client-test").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("Create without the verb: %v, want Forbidden", err)
	}
}

// TestClientWatchEvents: a watch stream as the API server writes it, in
// JSON and in protobuf, comes out of the client's Watch typed: a Lease's
// events and bookmarks as *coordinationv1.Lease, an error as a
// *metav1.Status that apierrors classifies.
func TestClientWatchEvents(t *testing.T) {
	id := "a"
	events := []watch.Event{
		{Type: watch.Added, Object: &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "jobs", Namespace: "default", ResourceVersion: "7"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &id}}},
		{Type: watch.Bookmark, Object: &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "9"}}},
		{Type: watch.Error, Object: &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired,
			Message: "too old resource version: 1 (9)"}},
	}
	for _, mediaType := range []string{runtime.ContentTypeJSON, runtime.ContentTypeProtobuf} {
		t.Run(mediaType, func(t *testing.T) {
			info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), mediaType)
			if !ok || info.StreamSerializer == nil {
				t.Fatalf("no stream serializer for %s", mediaType)
			}
			queries := make(chan url.Values, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				queries <- r.URL.Query()
				if r.URL.Path != "/apis/coordination.k8s.io/v1/namespaces/default/leases" {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", mediaType+";stream=watch")
				w.WriteHeader(http.StatusOK)
				enc := streaming.NewEncoder(info.StreamSerializer.Framer.NewFrameWriter(w), info.StreamSerializer.Serializer)
				embedded := codecs.EncoderForVersion(info.Serializer, coordinationv1.SchemeGroupVersion)
				for _, ev := range events {
					raw, err := runtime.Encode(embedded, ev.Object)
					if err != nil {
						t.Errorf("encode %s: %v", ev.Type, err)
						return
					}
					if err := enc.Encode(&metav1.WatchEvent{Type: string(ev.Type), Object: runtime.RawExtension{Raw: raw}}); err != nil {
						t.Errorf("write %s: %v", ev.Type, err)
						return
					}
					w.(http.Flusher).Flush()
				}
			}))
			defer srv.Close()
			lg, _, err := Clients(&rest.Config{Host: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			w, err := lg.Leases("default").Watch(context.Background(), metav1.ListOptions{ResourceVersion: "1", AllowWatchBookmarks: true})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			if query := <-queries; query.Get("watch") != "true" || query.Get("resourceVersion") != "1" || query.Get("allowWatchBookmarks") != "true" {
				t.Errorf("query %v", query)
			}
			var got []watch.Event
			for ev := range w.ResultChan() {
				got = append(got, ev)
			}
			if len(got) != len(events) {
				t.Fatalf("%d events, want %d: %+v", len(got), len(events), got)
			}
			if l, ok := got[0].Object.(*coordinationv1.Lease); got[0].Type != watch.Added || !ok || l.Name != "jobs" || *l.Spec.HolderIdentity != "a" || l.ResourceVersion != "7" {
				t.Errorf("first event %s %#v, want the Lease Added", got[0].Type, got[0].Object)
			}
			if l, ok := got[1].Object.(*coordinationv1.Lease); got[1].Type != watch.Bookmark || !ok || l.ResourceVersion != "9" {
				t.Errorf("second event %s %#v, want a Bookmark of a *coordinationv1.Lease at 9", got[1].Type, got[1].Object)
			}
			st, ok := got[2].Object.(*metav1.Status)
			if got[2].Type != watch.Error || !ok {
				t.Fatalf("third event %s %#v, want an Error of a *metav1.Status", got[2].Type, got[2].Object)
			}
			if err := apierrors.FromObject(st); !apierrors.IsResourceExpired(err) {
				t.Errorf("the Error event's status %v, want Expired", err)
			}
		})
	}
}

// TestClientsNeedsNoServer: Clients builds its clients without a request.
func TestClientsNeedsNoServer(t *testing.T) {
	lg, reviews, err := Clients(&rest.Config{Host: "https://127.0.0.1:1"})
	if err != nil || lg == nil || reviews == nil {
		t.Fatalf("Clients: %v", err)
	}
}
