package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// authSec: what a user and password cost an etcd leader's renewals.
const authSec = "etcd auth: a leader's renewals with a user and password"

const (
	authTTL   = 2 * time.Second
	authBusy  = 2 // busy loops on the host while the leaders run
	authUser  = "electd"
	authPass  = "bench-auth-pw"
	authLogin = "etcdserverpb.Auth/Authenticate"
)

// authRenewals runs three leaders at --ttl 2s side by side for
// -auth-window, each on an etcd of its own: two without auth (the second a
// control, whose ratio to the first shows what the figure's noise is) and
// one with auth on and a user allowed readwrite on /electd/ only, with two
// busy loops on the host. It reports each leader's mean renewal time
// (electd_renewal_seconds, from the send to the proof), the ratio of auth
// on to off (the target: within 1.2×) beside the control's, the logins the
// auth server served meanwhile, and the terms lost (the target: none; a
// term lost is a violation).
func (e *env) authRenewals(ctx context.Context) error {
	servers := map[string]*etcdServer{}
	for _, name := range []string{"auth-off", "auth-off-control", "auth-on"} {
		srv, err := startEtcd(ctx, e.etcdBin, e.dir, name)
		if err != nil {
			return err
		}
		defer srv.close()
		servers[name] = srv
	}
	secured := servers["auth-on"]
	if err := enableAuth(ctx, secured.cli); err != nil {
		return fmt.Errorf("enable auth: %w", err)
	}
	start := func(id, url string, env []string) (*node, error) {
		return e.startNode(ctx, nodeSpec{
			election: "bench-auth", id: id, store: url, ttl: authTTL, env: env,
			command: []string{e.sleepBin, "3600"}, dir: e.dir,
		})
	}
	off, err := start("auth-off", "etcd://"+servers["auth-off"].addr, nil)
	if err != nil {
		return err
	}
	defer off.kill()
	control, err := start("auth-off-control", "etcd://"+servers["auth-off-control"].addr, nil)
	if err != nil {
		return err
	}
	defer control.kill()
	on, err := start("auth-on", "etcd://"+authUser+"@"+secured.addr, []string{"ELECTD_STORE_PASSWORD=" + authPass})
	if err != nil {
		return err
	}
	defer on.kill()
	nodes := []*node{off, control, on}
	for _, n := range nodes {
		if err := waitUntil(ctx, 15*time.Second, func() bool {
			v, _, err := n.metric("electd_child_running")
			return err == nil && v == 1
		}); err != nil {
			return fmt.Errorf("%s's child did not start: %w", n.id, err)
		}
	}

	stopBusy, err := busyLoops(e.dir, authBusy)
	if err != nil {
		return err
	}
	defer stopBusy()
	before := map[*node]authFigures{}
	for _, n := range nodes {
		if before[n], err = n.authFigures(); err != nil {
			return err
		}
	}
	loginsBefore, err := secured.counts()
	if err != nil {
		return err
	}
	loadBefore := loadavg()
	sleepCtx(ctx, e.cfg.authWindow)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	loadAfter := loadavg()
	loginsAfter, err := secured.counts()
	if err != nil {
		return err
	}
	stopBusy()

	mean := map[*node]time.Duration{}
	for _, n := range nodes {
		after, err := n.authFigures()
		if err != nil {
			return err
		}
		d := after.minus(before[n])
		if d.renewals == 0 {
			return fmt.Errorf("%s: no renewal counted in %s", n.id, e.cfg.authWindow)
		}
		mean[n] = time.Duration(d.seconds / d.renewals * float64(time.Second))
		lost := d.lost > 0 || !after.leading
		e.rep.add(authSec, "electd, etcd, "+n.id, fmt.Sprintf("renewals in %s at --ttl 2s, %d busy loops", e.cfg.authWindow, authBusy),
			fmt.Sprintf("%.0f renewals, mean %s, %.0f failed; terms lost %.0f, still leading %v, child starts %.0f",
				d.renewals, ms(mean[n]), d.failed, d.lost, after.leading, d.starts),
			"no term lost", yesno(!lost && d.starts == 0))
		if lost || d.starts != 0 {
			e.rep.violation("auth: %s lost a term (or restarted its child) with the store up", n.id)
		}
	}
	ratio := float64(mean[on]) / float64(mean[off])
	noise := float64(mean[control]) / float64(mean[off])
	logins := loginsAfter.started[authLogin] - loginsBefore.started[authLogin]
	e.rep.add(authSec, "electd, etcd", "mean renewal with auth ÷ without (same run, same host)",
		fmt.Sprintf("%.2f× (%s ÷ %s; the control without auth: %.2f×); logins served by the auth server in the window: %.0f",
			ratio, ms(mean[on]), ms(mean[off]), noise, logins),
		"≤ 1.2×", yesno(ratio <= 1.2))
	e.rep.note(authSec, "Load average %s at the window's start, %s at its end, with %d busy loops on %d cores.", loadBefore, loadAfter, authBusy, runtime.NumCPU())
	return nil
}

// authFigures are one copy's counters, from its /metrics.
type authFigures struct {
	renewals, seconds, failed, lost, starts float64
	leading                                 bool
}

func (a authFigures) minus(b authFigures) authFigures {
	return authFigures{renewals: a.renewals - b.renewals, seconds: a.seconds - b.seconds, failed: a.failed - b.failed,
		lost: a.lost - b.lost, starts: a.starts - b.starts, leading: a.leading}
}

func (n *node) authFigures() (authFigures, error) {
	code, body, err := httpGet(n.hc, "http://"+n.http+"/metrics")
	if err != nil {
		return authFigures{}, err
	}
	if code != http.StatusOK {
		return authFigures{}, fmt.Errorf("%s /metrics: %d", n.id, code)
	}
	var f authFigures
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var into *float64
		switch {
		case strings.HasPrefix(line, "electd_renewal_seconds_count"):
			into = &f.renewals
		case strings.HasPrefix(line, "electd_renewal_seconds_sum"):
			into = &f.seconds
		case strings.HasPrefix(line, "electd_store_errors_total{") && strings.Contains(line, `op="renew"`):
			into = &f.failed
		case strings.HasPrefix(line, "electd_leadership_lost_total{"):
			into = &f.lost
		case strings.HasPrefix(line, "electd_child_starts_total"):
			into = &f.starts
		case strings.HasPrefix(line, "electd_is_leader"):
			f.leading = strings.HasSuffix(line, " 1")
			continue
		default:
			continue
		}
		fs := strings.Fields(line)
		v, err := strconv.ParseFloat(fs[len(fs)-1], 64)
		if err != nil {
			return f, fmt.Errorf("%s /metrics: %q: %w", n.id, line, err)
		}
		*into += v
	}
	return f, sc.Err()
}

// enableAuth turns etcd's auth on, with root and a user authUser whose
// role may read and write /electd/ only.
func enableAuth(ctx context.Context, cli *clientv3.Client) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	steps := []func() error{
		func() error { _, err := cli.UserAdd(ctx, "root", "bench-root-pw"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.RoleAdd(ctx, authUser); return err },
		func() error {
			_, err := cli.RoleGrantPermission(ctx, authUser, "/electd/", clientv3.GetPrefixRangeEnd("/electd/"),
				clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := cli.UserAdd(ctx, authUser, authPass); return err },
		func() error { _, err := cli.UserGrantRole(ctx, authUser, authUser); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return err
		}
	}
	return nil
}

// busyLoops starts n shell loops that spin on a core each until stop.
func busyLoops(dir string, n int) (stop func(), err error) {
	var ps []*proc
	stop = func() {
		for _, p := range ps {
			if !p.Exited() {
				p.killGroup()
			}
		}
	}
	for i := range n {
		p, err := procs.start(fmt.Sprintf("busy loop %d", i+1), "/bin/sh", []string{"-c", "while :; do :; done"},
			startOpts{env: baseEnv(), log: filepath.Join(dir, "busy.log")})
		if err != nil {
			stop()
			return nil, err
		}
		ps = append(ps, p)
	}
	return stop, nil
}
