package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/internal/demo"
	"github.com/electd/electd/internal/devetcd"
)

// demoHelp is the description of `electd demo`.
const demoHelp = "Starts an embedded etcd and three `electd run` processes wrapping a small job, then\n" +
	"resigns, kill -9s and SIGTERMs the leader in turn and prints a timeline with measured\n" +
	"handover and failover times, and whether two jobs ever ran at once."

func demoFlags() []cli.Flag {
	return []cli.Flag{
		&cli.DurationFlag{Name: "duration", Value: 20 * time.Second, Usage: "how long the demo runs"},
		&cli.DurationFlag{Name: "ttl", Value: 2 * time.Second, Usage: "lease TTL of the sidecars"},
		&cli.BoolFlag{Name: "verbose", Usage: "show the sidecars' logs"},
	}
}

func demoAction(c *cli.Context) error {
	if c.Duration("duration") < 8*time.Second {
		return elector.Configf("duration", "must be at least 8s to show a failover, got %s", c.Duration("duration"))
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable: %w", err)
	}
	dir, err := os.MkdirTemp("", "electd-demo-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	etcd, err := devetcd.Start(dir, "127.0.0.1:0", "fatal") // its shutdown noise is not the demo's
	if err != nil {
		return err
	}
	defer etcd.Close()
	fmt.Fprintf(c.App.Writer, "embedded etcd at %s\n", etcd.Endpoint())
	return demo.Run(ctx, demo.Config{Out: c.App.Writer, Self: self, Store: "etcd://" + etcd.Endpoint(),
		Duration: c.Duration("duration"), TTL: c.Duration("ttl"), Verbose: c.Bool("verbose")})
}
