package kit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/electd/electd/internal/testenv"
)

// Binaries are electd and the recording child, built for one test binary.
type Binaries struct {
	Dir, Electd, Recorder string
}

// Build builds electd and test/recorder into a new temporary directory
// (named after name). With $<ENV>_ELECTD_BIN set, that electd is used
// instead of building one; with $<ENV>_ELECTD_RACE=1, electd is built with
// the race detector.
func Build(name, env string) (*Binaries, error) {
	dir, err := os.MkdirTemp("", "electd-"+name+"-bin-")
	if err != nil {
		return nil, err
	}
	b := &Binaries{Dir: dir, Electd: filepath.Join(dir, "electd"), Recorder: filepath.Join(dir, "recorder")}
	root, err := testenv.ModuleRoot()
	if err != nil {
		b.Remove()
		return nil, err
	}
	var electdFlags []string
	if os.Getenv(env+"_ELECTD_RACE") == "1" {
		electdFlags = append(electdFlags, "-race")
	}
	builds := []struct {
		out, pkg string
		flags    []string
	}{
		{b.Electd, "./cmd/electd", electdFlags},
		{b.Recorder, "./test/recorder", nil},
	}
	if bin := os.Getenv(env + "_ELECTD_BIN"); bin != "" {
		if b.Electd, err = filepath.Abs(bin); err != nil {
			b.Remove()
			return nil, fmt.Errorf("$%s_ELECTD_BIN: %w", env, err)
		}
		builds = builds[1:]
	}
	for _, bd := range builds {
		args := append(append([]string{"build"}, bd.flags...), "-o", bd.out, bd.pkg)
		cmd := exec.Command(goTool(), args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Remove()
			return nil, fmt.Errorf("go %v: %w\n%s", args, err, out)
		}
	}
	return b, nil
}

// Remove deletes the directory the binaries were built in.
func (b *Binaries) Remove() { _ = os.RemoveAll(b.Dir) }

// goTool is the go command: from PATH, else from GOROOT.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if root := os.Getenv("GOROOT"); root != "" {
		return filepath.Join(root, "bin", "go")
	}
	return "go"
}
