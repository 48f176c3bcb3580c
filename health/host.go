package health

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// checkHost refuses, with 403, a request from loopback whose Host header
// names something else than a loopback address, localhost (or a name under
// .localhost), the address the connection reached, or one of
// Config.AllowedHosts. A web page that rebinds its own DNS name to
// 127.0.0.1 makes the browser on this host connect from loopback, but with
// the page's name as Host: without this check it would have loopback
// rights (POST /resign) and could read every endpoint. Peers from other
// addresses are not checked: they name electd however they reached it.
func (s *Server) checkHost(next http.Handler) http.Handler {
	allowed := map[string]bool{}
	for _, h := range s.cfg.AllowedHosts {
		allowed[normalHost(h)] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isLoopback(r.RemoteAddr) && !localHost(r, allowed) {
			s.log.Warn("request refused: Host is not this host (DNS rebinding?)", "remote", r.RemoteAddr, "host", r.Host, "path", r.URL.Path)
			writeError(w, http.StatusForbidden, "requests from loopback must name a loopback address, localhost or the listen address as Host")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// localHost reports whether r's Host names this host.
func localHost(r *http.Request, allowed map[string]bool) bool {
	h := normalHost(r.Host)
	if h == "" { // HTTP/1.0 without Host: no browser sends that
		return true
	}
	if h == "localhost" || strings.HasSuffix(h, ".localhost") || allowed[h] {
		return true
	}
	ip, err := netip.ParseAddr(h)
	if err != nil {
		return false
	}
	if ip.Unmap().IsLoopback() {
		return true
	}
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if ap, err := netip.ParseAddrPort(la.String()); err == nil && ap.Addr().Unmap() == ip.Unmap() {
			return true
		}
	}
	return false
}

// normalHost is host without its port, brackets, case and trailing dot.
func normalHost(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.TrimSuffix(strings.ToLower(host), ".")
}
