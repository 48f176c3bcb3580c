// Command clientgo is client-go's leader election (k8s.io/client-go/tools/
// leaderelection, on a LeaseLock) as a program, the way a controller runs
// it, for test/bench's k8s phase: one LeaderElector, Run once (client-go's
// Run is one-shot: it returns when leadership is lost or its context ends),
// with the timing and ReleaseOnCancel given by flags. SIGTERM or SIGINT
// cancels Run's context, as a controller's signal handler does.
//
// The API server and the credentials come from $KUBECONFIG (or the pod's
// service account), with client-go's default client options (no QPS or
// burst set: 5 and 10).
//
// It appends its life to the file named by -events, one line per event,
// "EVENT UNIXNANOS" (one write per line, with O_APPEND):
//
//	acquiring  Run is called
//	started    OnStartedLeading: the guarded code starts
//	ctxdone    the context OnStartedLeading was given is done: guarded code
//	           that watches it stops here
//	stopped    OnStoppedLeading (after the release, with ReleaseOnCancel)
//	exit       Run returned; the program exits 0
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

func main() {
	var (
		namespace = flag.String("namespace", "default", "the Lease's namespace")
		name      = flag.String("name", "", "the Lease's name (required)")
		id        = flag.String("id", "", "this candidate's identity (required)")
		lease     = flag.Duration("lease", 15*time.Second, "LeaseDuration")
		renew     = flag.Duration("renew", 10*time.Second, "RenewDeadline")
		retry     = flag.Duration("retry", 2*time.Second, "RetryPeriod")
		release   = flag.Bool("release", false, "ReleaseOnCancel")
		events    = flag.String("events", "", "append the events to this file (required)")
	)
	flag.Parse()
	if *name == "" || *id == "" || *events == "" {
		fail("-name, -id and -events are required")
	}
	f, err := os.OpenFile(*events, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fail("%v", err)
	}
	var mu sync.Mutex
	emit := func(ev string) {
		at := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if _, err := fmt.Fprintf(f, "%s %d\n", ev, at.UnixNano()); err != nil {
			fail("write %s: %v", *events, err)
		}
	}

	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		fail("kubeconfig: %v", err)
	}
	rc.UserAgent = "bench-client-go"
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		fail("client: %v", err)
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: *name, Namespace: *namespace},
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: *id},
	}
	guarded := make(chan struct{})
	var led atomic.Bool
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   *lease,
		RenewDeadline:   *renew,
		RetryPeriod:     *retry,
		ReleaseOnCancel: *release,
		Name:            *id,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				defer close(guarded)
				led.Store(true)
				emit("started")
				<-ctx.Done()
				emit("ctxdone")
			},
			OnStoppedLeading: func() { emit("stopped") },
		},
	})
	if err != nil {
		fail("%v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	emit("acquiring")
	le.Run(ctx)
	if led.Load() {
		select { // the callback's goroutine writes ctxdone
		case <-guarded:
		case <-time.After(5 * time.Second):
		}
	}
	emit("exit")
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "clientgo: "+format+"\n", args...)
	os.Exit(2)
}
