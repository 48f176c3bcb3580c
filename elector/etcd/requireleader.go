package etcd

import (
	"context"
	"errors"
	"io"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// requireLeader marks every request electd sends "require leader"
// (clientv3.WithRequireLeader, for every call rather than for some): a
// member that knows it has no raft leader (cut off from its peers, for
// about an election timeout) refuses at once with "no leader" instead of
// holding the request until it times out. clientv3 balances requests
// round-robin over every member it can connect to, partitioned or not, so
// without it one request in three waits out its whole timeout there; with
// it the retry, on the next member, comes after the backoff alone.
// Watches already asked for it; a member that loses its leader cancels
// them, and electd watches again from the revision it had reached.
func requireLeader() []grpc.DialOption {
	mark := func(ctx context.Context) context.Context {
		if ctx.Value(checkKey{}) != nil {
			return ctx // /healthz's member checks ask a member about itself, leader or not
		}
		return metadata.AppendToOutgoingContext(ctx, rpctypes.MetadataRequireLeaderKey, rpctypes.MetadataHasLeader)
	}
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return invoker(mark(ctx), method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			return streamer(mark(ctx), desc, cc, method, opts...)
		}),
	}
}

// refusedAtOnce reports a member's refusal for want of a raft leader: "no
// leader", or, for a stream the member ended before electd's request went
// out, io.EOF (gRPC reports the status only to a later Recv, which
// clientv3's KeepAliveOnce does not make).
func refusedAtOnce(err error) bool {
	return errors.Is(err, rpctypes.ErrNoLeader) || errors.Is(err, io.EOF)
}
