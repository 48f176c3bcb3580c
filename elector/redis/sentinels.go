package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Sentinels confirm, after each step that counts, that the server it ran on
// was still the master they monitor, with no failover of it in progress
// (see the package documentation, "Sentinel and Cluster"). A step that WAIT
// found on a replica proves that the replica had the write; it does not
// prove that no other replica had been promoted meanwhile: in a failover
// the sentinels promote one replica and name it at once, while they move
// the others to it one at a time (parallel-syncs), so the old master keeps
// a replica that answers WAIT for a while.
//
// A sentinel sets its failover_in_progress flag for the master before it
// sends REPLICAOF NO ONE to the replica it promotes, and clears it only when
// the failover ends (it then monitors the promoted replica, another run) or
// is aborted. So an answer, read after the step returned, that names the
// step's server (its run_id) with no failover in progress proves that this
// sentinel had promoted no replica before the step was sent; asked of every
// sentinel, no replica had been. The promoted replica's first step starts
// a new epoch there (its master_replid is new), and it grants nothing for
// one TTL after that: after the leader's deadline derived from the step.
type Sentinels struct {
	master string
	addrs  []string
	clis   []*redis.SentinelClient
}

// NewSentinels makes the sentinels that confirm the steps of master's
// elections, one client per options (each a sentinel's address and
// credentials). Close closes them.
func NewSentinels(master string, opts []*redis.Options) *Sentinels {
	s := &Sentinels{master: master}
	for _, o := range opts {
		s.addrs = append(s.addrs, o.Addr)
		s.clis = append(s.clis, redis.NewSentinelClient(o))
	}
	return s
}

// Close closes the sentinels' clients.
func (s *Sentinels) Close() error {
	var errs []error
	for _, c := range s.clis {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// server identifies the server a step ran on, as read on its connection
// after the step: its run_id, and its own address of the connection (""
// if unknown).
type server struct{ run, addr string }

// confirm asks every sentinel, at once, about the master of srv's step.
// Any sentinel that does not confirm (it names another server, a failover
// is in progress, it cannot be asked) makes the step not count:
// errUnconfirmed.
func (s *Sentinels) confirm(ctx context.Context, srv server) error {
	errs := make([]error, len(s.clis))
	var wg sync.WaitGroup
	for i := range s.clis {
		wg.Go(func() { errs[i] = s.confirmOne(ctx, i, srv) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", errUnconfirmed, err)
	}
	return nil
}

func (s *Sentinels) confirmOne(ctx context.Context, i int, srv server) error {
	m, err := s.clis[i].Master(ctx, s.master).Result()
	if err != nil {
		return fmt.Errorf("sentinel %s: master %s: %w", s.addrs[i], s.master, err)
	}
	if err := checkMaster(m, srv); err != nil {
		return fmt.Errorf("sentinel %s: %w", s.addrs[i], err)
	}
	return nil
}

// checkMaster checks a sentinel's SENTINEL MASTER answer: no failover of
// its master is in progress, and its master is srv: by run_id, or, while
// the sentinel has not read the run_id yet (it learns it from its next
// INFO of the master, up to 10 s after it switched to it), by address,
// the one it names the master by being the server's own of the step's
// connection.
func checkMaster(m map[string]string, srv server) error {
	named := net.JoinHostPort(m["ip"], m["port"])
	switch {
	case slices.Contains(strings.Split(m["flags"], ","), "failover_in_progress"):
		return fmt.Errorf("a failover of %s (%s) is in progress", m["name"], named)
	case srv.run != "" && m["runid"] == srv.run:
		return nil
	case m["runid"] == "" && srv.addr != "" && named == srv.addr:
		return nil
	}
	return fmt.Errorf("its master %s is %s, run %q, not the server of the write (%s, run %q)",
		m["name"], named, m["runid"], srv.addr, srv.run)
}

// localAddr is the laddr field of a CLIENT INFO line: the server's own
// address of the connection ("" if absent).
func localAddr(info string) string {
	for f := range strings.FieldsSeq(info) {
		if v, ok := strings.CutPrefix(f, "laddr="); ok {
			return v
		}
	}
	return ""
}

// checkStart warns when a sentinel knows of sentinels that are not among
// these: one of them could fail the master over without any step seeing
// it. It only logs.
func (s *Sentinels) checkStart(ctx context.Context, log *slog.Logger) {
	for i, cli := range s.clis {
		m, err := cli.Master(ctx, s.master).Result()
		if err != nil {
			log.Warn("cannot ask a sentinel about the master: until it answers, no term can be granted or renewed",
				"sentinel", s.addrs[i], "master", s.master, "err", err)
			continue
		}
		if n, err := strconv.Atoi(m["num-other-sentinels"]); err == nil && n+1 > len(s.clis) {
			log.Warn("a sentinel knows of more sentinels than the store URL names; name every sentinel that monitors the master, as one left out could fail it over unseen",
				"sentinel", s.addrs[i], "sentinels", n+1, "named", len(s.clis))
		}
	}
}

// runID is the run_id of a born record's run ("run_id master_replid").
func runID(born string) string {
	id, _, _ := strings.Cut(born, " ")
	return id
}
