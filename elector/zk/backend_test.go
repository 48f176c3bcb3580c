package zk_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/backend"
	"github.com/electd/electd/elector/zk"
	"github.com/electd/electd/internal/testenv"
)

func parse(raw string) (backend.Target, error) {
	name, rest, _ := strings.Cut(raw, "://")
	s, _ := zk.Backend.Scheme(name)
	return zk.Backend.Parse(backend.URL{Scheme: s, Rest: rest, Redacted: raw})
}

// TestZKParse: hosts with ports, an optional chroot, digest credentials;
// a chroot ZooKeeper would refuse is refused before anything is dialled.
func TestZKParse(t *testing.T) {
	tg, err := parse("zk://alice:pw@h1:2181,h2:2182/apps/one")
	if err != nil || tg.User != "alice" || tg.Password != "pw" || strings.Join(tg.Hosts, ",") != "h1:2181,h2:2182" {
		t.Fatalf("parse = %+v, %v", tg, err)
	}
	for _, bad := range []string{"zk://h1", "zk://h1:2181/zookeeper", "zk://h1:2181/a/../b", "zk://h1:2181?x=1"} {
		_, err := parse(bad)
		var ce *elector.ConfigError
		if !errors.As(err, &ce) || ce.Field != "store" {
			t.Errorf("parse %s: %v, want a ConfigError naming store", bad, err)
		}
	}
}

// TestZKAnswersPlain: store/'s check that a zks:// URL points at a plain
// client port recognises a ZooKeeper server, and nothing else.
func TestZKAnswersPlain(t *testing.T) {
	srv := testenv.StartZK(t)
	tg, err := parse("zk://" + srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	ask := func(addr string) bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			t.Fatalf("dial %s: %v", addr, err)
		}
		defer c.Close()
		if err := c.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
			t.Fatal(err)
		}
		return tg.AnswersPlain(context.Background(), c)
	}
	if !ask(srv.Addr()) {
		t.Error("a ZooKeeper server was not recognised")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			_ = c.Close() // a server that answers nothing
		}
	}()
	if ask(ln.Addr().String()) {
		t.Error("a silent server was taken for ZooKeeper")
	}
}
