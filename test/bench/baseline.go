package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/electd/electd/internal/release"
)

// build is one electd binary a phase runs. Every phase runs the tree's
// own production build; with -baseline REV, the etcd-cluster phase also
// runs REV's, built the same way, beside it (figures "before" and
// "after" a change, measured in one run on the same machine and load).
type build struct {
	bin   string // production build (internal/release)
	label string // in subjects and notes; "" when only one build is measured
	key   string // in election names: "" or "base-"
}

// subject is s with the build's label, if any.
func (bd build) subject(s string) string {
	if bd.label == "" {
		return s
	}
	return s + ", " + bd.label
}

// on is "electd on NAME", with the build's label.
func (bd build) on(name string) string {
	if bd.label == "" {
		return "electd on " + name
	}
	return fmt.Sprintf("electd (%s) on %s", bd.label, name)
}

// Labels of the two builds of a comparison (report.go orders rows by them:
// the baseline first).
const (
	baselineLabel = "baseline" // + REV
	treeLabel     = "this tree"
)

// tree is the tree's own build, unlabelled: every phase but etcd-cluster.
func (e *env) tree() build { return build{bin: e.electd} }

// compared are the builds the etcd-cluster phase measures: the baseline
// (if any) first, then the tree's.
func (e *env) compared() []build {
	if e.baseline.bin == "" {
		return []build{e.tree()}
	}
	return []build{e.baseline, {bin: e.electd, label: treeLabel}}
}

// buildBaseline builds cmd/electd at rev as build builds the tree's
// (internal/release's production build, the same toolchain and
// environment), from `git
// archive rev` unpacked into the temporary directory and removed once
// built. An archive rather than `git worktree add`: it leaves the
// repository's metadata (shared by every worktree of it) untouched, and
// holds exactly the commit, nothing untracked.
func (e *env) buildBaseline(ctx context.Context, rev string) error {
	start := time.Now()
	full, err := gitOut(ctx, e.root, "rev-parse", "--verify", rev+"^{commit}")
	if err != nil {
		return fmt.Errorf("-baseline %s: %w", rev, err)
	}
	short, err := gitOut(ctx, e.root, "rev-parse", "--short", full)
	if err != nil {
		return err
	}
	src := filepath.Join(e.dir, "baseline-src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(src)
	archive := exec.CommandContext(ctx, "git", "-C", e.root, "archive", "--format=tar", full)
	untar := exec.CommandContext(ctx, "tar", "-x", "-C", src)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return err
	}
	untar.Stdin = pipe
	var archErr, tarErr strings.Builder
	archive.Stderr, untar.Stderr = &archErr, &tarErr
	if err := untar.Start(); err != nil {
		return err
	}
	if err := archive.Run(); err != nil {
		_ = untar.Wait()
		return fmt.Errorf("git archive %s: %v: %s", short, err, archErr.String())
	}
	if err := untar.Wait(); err != nil {
		return fmt.Errorf("tar -x of git archive %s: %v: %s", short, err, tarErr.String())
	}
	bin := filepath.Join(e.dir, "bin", "electd-baseline")
	args := release.BuildArgs(bin, "./cmd/electd", "")
	cmd := exec.CommandContext(ctx, goTool(), args...)
	cmd.Dir = src
	// The archive lies outside the tree: a go.work named by the
	// environment would build other modules' copies into it.
	cmd.Env = append(append(os.Environ(), release.Env...), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("baseline %s: go %s: %v\n%s", short, strings.Join(args, " "), err, out)
	}
	e.baseline = build{bin: bin, label: baselineLabel + " " + short, key: "base-"}
	e.treeDesc = treeLabel // with HEAD, for the header; rows say treeLabel
	if head, err := gitOut(ctx, e.root, "rev-parse", "--short", "HEAD"); err == nil {
		e.treeDesc += " (HEAD " + head
		if st, err := gitOut(ctx, e.root, "status", "--porcelain", "--untracked-files=no"); err == nil && st != "" {
			e.treeDesc += " + uncommitted changes"
		}
		e.treeDesc += ")"
	}
	logf("built electd-baseline from %s (%s); compared with %s", short, time.Since(start).Round(100*time.Millisecond), e.treeDesc)
	return nil
}

// gitOut runs git in dir and returns its trimmed output.
func gitOut(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", errors.Join(fmt.Errorf("git %s: %w", strings.Join(args, " "), err), errors.New(strings.TrimSpace(stderr.String())))
	}
	return strings.TrimSpace(string(out)), nil
}
