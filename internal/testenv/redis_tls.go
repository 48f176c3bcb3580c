package testenv

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"strconv"
	"testing"
)

// RedisOptions secures a redis-server started by StartRedisWith. The zero
// value is StartRedis: plain TCP, no password.
type RedisOptions struct {
	// CA, when set, makes the server speak only TLS (port 0, tls-port) with
	// a certificate CA issues for 127.0.0.1 and localhost, and trust client
	// certificates that CA signed.
	CA *CA
	// ClientCertAuth (with CA) requires every client to present a
	// certificate signed by CA (tls-auth-clients yes); otherwise one is
	// optional.
	ClientCertAuth bool
	// Users are ACL users. When any is given, the default user is disabled,
	// so every client must log in as one of them.
	Users []RedisUser
}

// RedisUser is an ACL user. Rules are Redis ACL rules; nil means
// ["~electd:*", "&electd:*", "+@all"]: every command, on electd's keys and
// channels only.
type RedisUser struct {
	Name, Password string
	Rules          []string
}

func (o RedisOptions) withDefaults(t testing.TB) RedisOptions {
	t.Helper()
	users := make([]RedisUser, len(o.Users))
	for i, u := range o.Users {
		if u.Rules == nil {
			u.Rules = []string{"~electd:*", "&electd:*", "+@all"}
		}
		users[i] = u
	}
	o.Users = users
	return o
}

// URL returns the --store URL of this server, without credentials:
// redis://127.0.0.1:PORT, or rediss://… with TLS.
func (r *Redis) URL() string {
	if r.opts.CA != nil {
		return "rediss://" + r.Addr()
	}
	return "redis://" + r.Addr()
}

// clientTLS is testenv's own client configuration: nil without TLS, else it
// trusts the CA and presents a certificate of its own (common name
// "testenv").
func (r *Redis) clientTLS() *tls.Config {
	if r.opts.CA == nil {
		return nil
	}
	return r.testenvTLS.Clone()
}

// securityArgs are the redis-server arguments for the port, TLS and ACL
// users. Redis reads "--name v1 v2" as the config line "name v1 v2".
func (r *Redis) securityArgs() []string {
	port := strconv.Itoa(r.port)
	if r.opts.CA == nil {
		return append([]string{"--port", port}, r.aclArgs()...)
	}
	auth := "no"
	if r.opts.ClientCertAuth {
		auth = "yes"
	}
	args := []string{
		"--port", "0",
		"--tls-port", port,
		"--tls-cert-file", r.serverCert.CertFile,
		"--tls-key-file", r.serverCert.KeyFile,
		"--tls-ca-cert-file", r.opts.CA.CertFile,
		"--tls-auth-clients", auth,
	}
	return append(args, r.aclArgs()...)
}

func (r *Redis) aclArgs() []string {
	if len(r.opts.Users) == 0 {
		return nil
	}
	args := []string{
		"--user", "default", "off",
		"--user", r.admin.user, "on", ">" + r.admin.password, "~*", "&*", "+@all",
	}
	for _, u := range r.opts.Users {
		args = append(args, "--user", u.Name, "on", ">"+u.Password)
		args = append(args, u.Rules...)
	}
	return args
}

// randomPassword returns 32 random hex digits.
func randomPassword(t testing.TB) string {
	t.Helper()
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("testenv: random password: %v", err)
	}
	return hex.EncodeToString(b[:])
}
