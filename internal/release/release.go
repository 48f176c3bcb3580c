// Package release says how electd's production build is made: the one
// description that the Dockerfile, the Makefile's release target, README's
// build line, the production-build test and the benchmarks follow (the
// copies in files that are not Go are checked by this package's test).
//
// The build tags leave out what a production electd never runs, and what
// would otherwise cost every copy memory at start-up (each package's init
// functions run, and touch its pages, whether or not it is used):
//
//   - noembed: the embedded etcd that only `demo` and `dev` use;
//   - grpcnotrace: gRPC's golang.org/x/net/trace (its /debug/requests
//     pages, which electd does not serve, and html/template with it);
//   - urfave_cli_no_docs: urfave/cli's man page and Markdown generators
//     (go-md2man and blackfriday), which electd does not offer.
//
// CGO_ENABLED=0: a static binary for a distroless image, without libc's
// pages (1.5 MB of an idle copy's RSS) or its threads' 8 MB stacks.
package release

import (
	"slices"
	"strings"
)

// Tags are the production build's tags, comma-separated as go build takes
// them.
const Tags = "noembed,grpcnotrace,urfave_cli_no_docs"

// Env is what the build's environment must add.
var Env = []string{"CGO_ENABLED=0"}

// LDFlags strips the symbol table and DWARF (they are not loaded, so an
// idle copy's memory is the same without; the binary is 30 % smaller).
const LDFlags = "-s -w"

// BuildArgs are the arguments of go build for the production binary out
// of package pkg (ldflags: more -ldflags, such as -X main.version=V).
func BuildArgs(out, pkg, ldflags string) []string {
	return []string{"build", "-trimpath", "-tags", Tags, "-ldflags", strings.TrimSpace(LDFlags + " " + ldflags), "-o", out, pkg}
}

// Command is the build as a shell line, as README and the Dockerfile
// show it: BuildArgs after Env, an argument with spaces quoted.
func Command(out, pkg string) string {
	words := append(slices.Clone(Env), "go")
	for _, a := range BuildArgs(out, pkg, "") {
		if strings.Contains(a, " ") {
			a = `"` + a + `"`
		}
		words = append(words, a)
	}
	return strings.Join(words, " ")
}
