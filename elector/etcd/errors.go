package etcd

import (
	"context"
	"errors"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/electd/electd/elector"
)

// permanent reports errors that retrying cannot fix: credentials and
// permissions. Every other error is retried while the deadline holds.
func permanent(err error) bool {
	switch {
	case errors.Is(err, rpctypes.ErrPermissionDenied),
		errors.Is(err, rpctypes.ErrAuthFailed),
		errors.Is(err, rpctypes.ErrUserEmpty),
		errors.Is(err, rpctypes.ErrAuthNotEnabled):
		return true
	}
	switch status.Code(err) {
	case codes.PermissionDenied, codes.Unauthenticated:
		return true
	}
	return false
}

// errorClass names an etcd error's class for logs, metrics and /healthz:
// its gRPC code in snake case ("unavailable", "resource_exhausted", ...),
// or "timeout".
func errorClass(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return elector.ClassTimeout
	}
	switch c := status.Code(err); c {
	case codes.OK, codes.Unknown:
		return elector.ClassOther
	case codes.DeadlineExceeded:
		return elector.ClassTimeout
	default:
		return snake(c.String())
	}
}

// snake turns "ResourceExhausted" into "resource_exhausted".
func snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}
