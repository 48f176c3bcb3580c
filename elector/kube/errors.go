package kube

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/electd/electd/elector"
)

// permanentError marks an answer no retry can fix: the API server is not
// a store electd can fence on (its resource versions are not numbers), or
// RBAC refuses a verb at start (Conn.Ping).
type permanentError struct{ err error }

func (p *permanentError) Error() string { return p.err.Error() }
func (p *permanentError) Unwrap() error { return p.err }

func isPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// classify wraps the API server's refusals in a message that says what
// they are. They are retried, not permanent: an API server that has just
// restarted answers 403 until its RBAC caches are filled, and one that
// refuses a token (401) while its authenticator starts. A refusal that
// lasts is the start check's to report (Conn.Ping, exit 2); while
// electd runs, it is logged and shown on /healthz, and the term, if any,
// ends by its deadline.
func classify(err error) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("the API server refused the credentials: %w", err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("RBAC refused a verb on leases.coordination.k8s.io: %w", err)
	}
	return err
}

// errorClass names an error for the failure log and metrics.
func errorClass(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded), apierrors.IsTimeout(err), apierrors.IsServerTimeout(err):
		return elector.ClassTimeout
	case apierrors.IsConflict(err):
		return "Conflict"
	case apierrors.IsNotFound(err):
		return "NotFound"
	case apierrors.IsTooManyRequests(err):
		return "TooManyRequests"
	case apierrors.IsUnauthorized(err):
		return "Unauthorized"
	case apierrors.IsForbidden(err):
		return "Forbidden"
	case apierrors.IsInternalError(err), apierrors.IsServiceUnavailable(err):
		return "ServerError"
	}
	return "conn"
}
