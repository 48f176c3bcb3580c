package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/electd/electd/internal/devetcd"
	"github.com/urfave/cli/v2"
)

func devFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "listen-client", Value: "127.0.0.1:2379", Usage: "client address of the embedded etcd"},
		&cli.StringFlag{Name: "data-dir", Usage: "data directory (default: a temporary one, removed on exit)"},
	}
}

func devAction(c *cli.Context) error {
	dir := c.String("data-dir")
	if dir == "" {
		tmp, err := os.MkdirTemp("", "electd-dev-")
		if err != nil {
			return fmt.Errorf("data dir: %w", err)
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	m, err := devetcd.Start(dir, c.String("listen-client"), "warn")
	if err != nil {
		return err
	}
	defer m.Close()
	fmt.Fprintf(c.App.Writer, "embedded etcd ready; data in %s\nuse: --store etcd://%s\nCtrl-C to stop\n", dir, m.Endpoint())
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	return nil
}
