package zk

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/go-zookeeper/zk"
)

// The requests on nodes that the elector, the lock and the proofs share.

// existsOf is a read of node p: whether it exists.
func existsOf(p string) func(z *zk.Conn) (bool, error) {
	return func(z *zk.Conn) (bool, error) {
		ok, _, err := z.Exists(p)
		return ok, err
	}
}

// createPath creates node p and those above it that are missing, with
// acl; nodes that exist are left as they are.
func createPath(z *zk.Conn, p string, acl []zk.ACL) error {
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i := range parts {
		q := "/" + strings.Join(parts[:i+1], "/")
		if _, err := z.Create(q, nil, 0, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", q, err)
		}
	}
	return nil
}

// put writes data to the persistent node p, creating it (with acl) and
// the nodes above it when missing: one write either way, a set or the
// create; a create that finds p made meanwhile sets it.
func put(z *zk.Conn, p string, data []byte, acl []zk.ACL) error {
	_, err := z.Set(p, data, -1)
	if !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	if dir := path.Dir(p); dir != "/" {
		if err := createPath(z, dir, acl); err != nil {
			return err
		}
	}
	if _, err = z.Create(p, data, 0, acl); !errors.Is(err, zk.ErrNodeExists) {
		return err
	}
	_, err = z.Set(p, data, -1)
	return err
}
