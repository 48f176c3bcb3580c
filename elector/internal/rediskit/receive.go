package rediskit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// Receive reads ps's messages until its subscription fails, or ctx ends
// (then nil), and hands each (a *redis.Subscription, *redis.Message or
// *redis.Pong) to handle. A connection that stays silent for interval is
// pinged; silent for another, it is dropped (a black-holed connection
// never reports an error by itself).
func Receive(ctx context.Context, ps *redis.PubSub, interval time.Duration, handle func(msg any)) error {
	pinged := false
	for {
		msg, err := ps.ReceiveTimeout(ctx, interval)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				return fmt.Errorf("receive: %w", err)
			}
			if pinged {
				return fmt.Errorf("subscription silent for %s after a ping", interval)
			}
			if err := ps.Ping(ctx); err != nil {
				return fmt.Errorf("ping: %w", err)
			}
			pinged = true
			continue
		}
		pinged = false
		handle(msg)
	}
}
