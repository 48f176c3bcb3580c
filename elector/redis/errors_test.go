package redis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector/internal/rediskit"
)

// replyError is an error reply as go-redis returns it (a redis.Error).
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

var _ redis.Error = replyError("")

func TestErrorClass(t *testing.T) {
	inScript := func(code, msg string) error {
		// Redis 7 keeps the code of an error raised by redis.call.
		return replyError(code + " " + msg + " script: 8931, on @user_script:1.")
	}
	tests := []struct {
		name      string
		err       error
		class     string
		permanent bool
	}{
		{name: "cannot persist", err: inScript("MISCONF", "Redis is configured to save RDB snapshots"), class: "MISCONF"},
		{name: "demoted", err: inScript("READONLY", "You can't write against a read only replica."), class: "READONLY"},
		{name: "loading", err: replyError("LOADING Redis is loading the dataset in memory"), class: "LOADING"},
		{name: "busy script", err: replyError("BUSY Redis is busy running a script."), class: "BUSY"},
		{name: "slot migrating", err: replyError("TRYAGAIN Multiple keys request during rehashing of slot"), class: "TRYAGAIN"},
		{name: "cluster down", err: replyError("CLUSTERDOWN The cluster is down"), class: "CLUSTERDOWN"},
		{name: "stale replica", err: replyError("MASTERDOWN Link with MASTER is down"), class: "MASTERDOWN"},
		{name: "out of memory", err: inScript("OOM", "command not allowed when used memory > 'maxmemory'."), class: "OOM"},
		{name: "no replicas", err: replyError("NOREPLICAS Not enough good replicas to write."), class: "NOREPLICAS"},
		{name: "moved", err: replyError("MOVED 3999 127.0.0.1:6381"), class: "MOVED"},
		{name: "ask", err: replyError("ASK 3999 127.0.0.1:6381"), class: "ASK"},
		{name: "before Redis 7: wrapped in the script's error", err: replyError("ERR Error running script (call to f_8931): @user_script:12: -READONLY You can't write against a read only replica."), class: "READONLY"},
		{name: "before Redis 7: wrapped OOM", err: replyError("ERR Error running script (call to f_8931): @user_script:12: -OOM command not allowed when used memory > 'maxmemory'."), class: "OOM"},
		{name: "script killed", err: replyError("ERR Script killed by user with SCRIPT KILL..."), class: "killed"},
		{name: "sentinel without the master", err: fmt.Errorf("redis: all sentinels unreachable: %w", errors.Join(redis.Nil, io.EOF)), class: "nil"},
		{name: "client limit", err: replyError("ERR max number of clients reached"), class: "maxclients"},
		{name: "unreplicated", err: fmt.Errorf("renew: %w", errUnreplicated), class: "unreplicated"},
		{name: "reset", err: &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, class: "conn"},
		{name: "refused", err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, class: "conn"},
		{name: "eof", err: io.EOF, class: "conn"},
		{name: "deadline", err: fmt.Errorf("step: %w", context.DeadlineExceeded), class: "timeout"},
		{name: "pool timeout", err: redis.ErrPoolTimeout, class: "timeout"},
		{name: "wrong password", err: replyError("WRONGPASS invalid username-password pair"), class: "auth", permanent: true},
		{name: "acl", err: replyError("NOPERM this user has no permissions to run the 'evalsha' command"), class: "NOPERM", permanent: true},
		{name: "scripting refused", err: replyError("ERR unknown command 'evalsha'"), class: "ERR", permanent: true},
		{name: "closed client", err: redis.ErrClosed, class: "closed", permanent: true},
		{name: "bad reply", err: rediskit.Permanent(errors.New("unexpected script reply")), class: "other", permanent: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := errorClass(tt.err); got != tt.class {
				t.Errorf("errorClass(%v) = %q, want %q", tt.err, got, tt.class)
			}
			if got := isPermanent(tt.err); got != tt.permanent {
				t.Errorf("isPermanent(%v) = %v, want %v", tt.err, got, tt.permanent)
			}
			if got := isPermanent(classify(tt.err)); got != tt.permanent {
				t.Errorf("isPermanent(classify(%v)) = %v, want %v", tt.err, got, tt.permanent)
			}
		})
	}
}
