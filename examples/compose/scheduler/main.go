// Command scheduler is the tiny singleton job of the compose example: electd
// starts it on the leader only. Every --every it "runs a job" and logs it
// with the fencing token electd gave it; on --listen it answers which copy
// runs and how many jobs it ran, so HAProxy's routing can be watched. It
// stops on SIGTERM, as electd asks before its lease can lapse.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	every := flag.Duration("every", 5*time.Second, "time between job runs")
	listen := flag.String("listen", ":8080", "HTTP address answering who runs the jobs")
	flag.Parse()
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil)).With(
		"id", os.Getenv("ELECTD_ID"), "token", os.Getenv("ELECTD_FENCING_TOKEN"))
	if err := run(*every, *listen, log); err != nil {
		log.Error("scheduler failed", "err", err)
		os.Exit(1)
	}
}

func run(every time.Duration, listen string, log *slog.Logger) error {
	if every <= 0 {
		return fmt.Errorf("--every must be positive, got %s", every)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	started := time.Now()
	var runs atomic.Int64

	srv := &http.Server{
		Addr:              listen,
		ReadHeaderTimeout: 5 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%s runs the jobs (fencing token %s): %d runs since %s\n",
				os.Getenv("ELECTD_ID"), os.Getenv("ELECTD_FENCING_TOKEN"), runs.Load(), started.UTC().Format(time.RFC3339))
		}),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	log.Info("scheduler started", "every", every.String(), "listen", listen)

	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			log.Info("scheduler stopping", "runs", runs.Load())
			sctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			return srv.Shutdown(sctx)
		case err := <-errc:
			if errors.Is(err, http.ErrServerClosed) {
				return nil
			}
			return fmt.Errorf("serve %s: %w", listen, err)
		case t := <-tick.C:
			// A real job would send the fencing token with every write,
			// and the resource would refuse tokens lower than one it saw.
			log.Info("job run", "run", runs.Add(1), "at", t.UTC().Format(time.RFC3339Nano))
		}
	}
}
