package supervisor

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The userns containment mode as an ordinary user: the tests below re-run
// this test binary as uid and gid 65534 (nobody) under setpriv, since the
// mode exists for users who are not root.

const (
	// envAsNobody is set in the environment of the tests re-run as nobody.
	envAsNobody = "ELECTD_TEST_AS_NOBODY"
	// envShowID names the helpers TestUsernsChildView runs: a set-user-ID
	// root copy of showid, and one with the file capability cap_net_raw+ep
	// (as ping has), separated by a colon. Only root can make them, so the
	// root test run makes them for the run as nobody.
	envShowID = "ELECTD_TEST_SHOWID"
	// envGroupFile names a file that only root and the group adm (4) may
	// read, which the run as nobody keeps as a supplementary group.
	envGroupFile = "ELECTD_TEST_GROUP_FILE"
	nobody       = 65534
	groupAdm     = 4
)

// TestUsernsAsNonRoot re-runs, as nobody, the tests that run the child's
// tree in every mode: there pidns is refused (no CAP_SYS_ADMIN), auto gives
// userns, and every userns subtest must pass, not skip.
func TestUsernsAsNonRoot(t *testing.T) {
	tests := []string{
		"TestResolveContainment", "TestNamespacePassesThrough", "TestNamespaceStopReachesWholeTree",
		"TestTreeGoneBeforeResign", "TestRestartAfterTreeGone", "TestDeadlineKillsTermIgnoringTree",
		"TestTermLossStopsChild", "TestRunOnceAfterExitAfterTree", "TestUsernsChildView",
	}
	out := runAsNobody(t, "^("+strings.Join(tests, "|")+")$", showIDHelpers(t), groupFile(t))
	wants := []string{
		"--- PASS: TestResolveContainment/auto_picks_the_strongest_that_works",
		"auto: userns",
		"--- PASS: TestNamespacePassesThrough/userns",
		"--- SKIP: TestNamespacePassesThrough/pidns",
		"--- PASS: TestNamespaceStopReachesWholeTree/userns",
		"--- PASS: TestTreeGoneBeforeResign/userns/resign",
		"--- PASS: TestTreeGoneBeforeResign/userns/exit",
		"--- PASS: TestTreeGoneBeforeResign/pgroup/resign",
		"--- PASS: TestRestartAfterTreeGone/userns",
		"--- PASS: TestDeadlineKillsTermIgnoringTree/userns",
		"--- PASS: TestTermLossStopsChild/userns",
		"--- PASS: TestRunOnceAfterExitAfterTree/userns",
		"--- PASS: TestUsernsChildView",
	}
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("the run as nobody has no %q", w)
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("the run as nobody:\n%s", out)
	}
}

// runAsNobody runs the tests matching run in a copy of this test binary as
// uid and gid 65534 with the supplementary group adm (4), and returns its verbose
// output; it fails the test if they fail. It skips, loudly, when this
// process is not root (then the tests ran as non-root already) or setpriv
// is missing (fails under CI).
func runAsNobody(t *testing.T, run string, env ...string) string {
	t.Helper()
	if os.Getenv(envAsNobody) != "" {
		t.Skip("SKIP: already running as nobody")
	}
	if os.Geteuid() != 0 {
		t.Skipf("SKIP: not root (euid %d): the tests of every mode ran as this user already", os.Geteuid())
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("setpriv is needed to run the tests as nobody: %v", err)
		}
		t.Skipf("SKIP: no setpriv (util-linux) to run the tests as nobody: %v", err)
	}
	dir := worldDir(t)
	bin := filepath.Join(dir, "supervisor.test")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	copyFile(t, self, bin, 0o755)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, setpriv, "--reuid="+strconv.Itoa(nobody), "--regid="+strconv.Itoa(nobody), "--groups="+strconv.Itoa(groupAdm),
		"--", bin, "-test.run="+run, "-test.v", "-test.count=1")
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CI=") && !strings.HasPrefix(kv, "HOME=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, envAsNobody+"=1", "HOME="+dir)
	cmd.Env = append(cmd.Env, env...)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the tests as nobody failed: %v\n%s", err, b)
	}
	return string(b)
}

// worldDir is a temporary directory that every user can read and enter.
func worldDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "electd-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func copyFile(t *testing.T, from, to string, perm os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(to, perm); err != nil { // past the umask
		t.Fatal(err)
	}
}

// groupFile makes, as root, a file that only root and the group adm may
// read, and returns the environment entry that names it.
func groupFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(worldDir(t), "adm-only")
	if err := os.WriteFile(path, []byte("adm-only\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, 0, groupAdm); err != nil {
		t.Fatal(err)
	}
	return envGroupFile + "=" + path
}

// showIDC prints the real and effective uid, the effective capability set
// (hex) of the process it runs as, and whether it may open a raw ICMP
// socket (what ping's cap_net_raw is for): "raw" or the error.
const showIDC = `#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>
#include <sys/socket.h>
#include <netinet/in.h>
int main(void) {
	char l[256];
	unsigned long long cap = 0;
	FILE *f = fopen("/proc/self/status", "r");
	while (f && fgets(l, sizeof l, f))
		if (!strncmp(l, "CapEff:", 7))
			sscanf(l + 7, "%llx", &cap);
	int s = socket(AF_INET, SOCK_RAW, IPPROTO_ICMP);
	printf("%d %d %llx %s\n", (int)getuid(), (int)geteuid(), cap, s >= 0 ? "raw" : strerror(errno));
	return 0;
}
`

// showIDHelpers builds, as root, the set-user-ID and the file-capability
// copies of showid for the run as nobody, and returns the environment entry
// that names them (none if there is no C compiler).
func showIDHelpers(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		return ""
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Logf("no C compiler: the set-user-ID and file-capability checks are left out: %v", err)
		return ""
	}
	dir := worldDir(t)
	src, suid, capBin := filepath.Join(dir, "showid.c"), filepath.Join(dir, "showid-suid"), filepath.Join(dir, "showid-cap")
	if err := os.WriteFile(src, []byte(showIDC), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-O2", "-o", suid, src).CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	copyFile(t, suid, capBin, 0o755)
	if err := syscall.Chmod(suid, 0o4755); err != nil { // os.Chmod does not take the bit so
		t.Fatal(err)
	}
	if err := unix.Setxattr(capBin, "security.capability", netRawCap(), 0); err != nil {
		t.Logf("cannot give showid a file capability (%v): that check is left out", err)
		return envShowID + "=" + suid + ":"
	}
	return envShowID + "=" + suid + ":" + capBin
}

// netRawCap is the security.capability value for cap_net_raw+ep, as
// `setcap cap_net_raw+ep` writes it (VFS_CAP_REVISION_2).
func netRawCap() []byte {
	const capNetRaw = 13
	v := make([]byte, 20)
	binary.LittleEndian.PutUint32(v[0:], 0x02000000|1) // revision 2, effective
	binary.LittleEndian.PutUint32(v[4:], 1<<capNetRaw) // permitted, low word
	return v
}

// TestUsernsChildView measures what changes for a child in the userns mode:
// the uid and gid it sees, the owner of files of other users, /proc,
// set-user-ID and file-capability programs. As nobody (see
// TestUsernsAsNonRoot) it asserts that no privilege is gained; as root it
// logs what root's child sees.
func TestUsernsChildView(t *testing.T) {
	needMode(t, ContainUserns)
	uid, gid := os.Geteuid(), os.Getegid()
	own := filepath.Join(t.TempDir(), "own")
	if err := os.WriteFile(own, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	suid, capBin, _ := strings.Cut(os.Getenv(envShowID), ":")
	script := `echo "id $(id -u) $(id -g)"
echo "groups $(id -G)"
echo "supplementary $(awk '/^Groups:/ { print $2 }' /proc/self/status)"
echo "root-file $(stat -c %u:%g /etc/passwd)"
echo "own-file $(stat -c %u:%g ` + own + `)"
echo "nspid $$"
echo "proc-1 $(cat /proc/1/comm)"
echo "proc-entries $(ls -d /proc/[0-9]* | wc -l)"
echo "uid_map $(cat /proc/self/uid_map | tr -s ' ')"
echo "gid_map $(cat /proc/self/gid_map | tr -s ' ')"
echo "setgroups $(cat /proc/self/setgroups)"
echo "capeff $(grep CapEff /proc/self/status | tr -d '\t')"
echo "group-file $(cat "$GROUPFILE" 2>&1)"
echo "bind-80 $(perl -MIO::Socket::INET -e 'print IO::Socket::INET->new(LocalAddr => "127.0.0.1:80", Listen => 1, ReuseAddr => 1) ? "ok" : "$!"' 2>&1)"
echo "su $(su -c true root </dev/null 2>&1 | tr '\n' ' ')"
echo "passwd $(passwd -S 2>&1 </dev/null | head -1)"
[ -n "$SUID" ] && echo "setuid $($SUID)"
[ -n "$CAPBIN" ] && echo "filecap $($CAPBIN)"
exit 0
`
	view := func(mode Containment) map[string]string {
		out := newSyncBuf()
		c := runChild(t, ChildSpec{Path: "/bin/sh", Args: []string{"-c", script},
			Env: []string{"PATH=/usr/bin:/bin:/usr/sbin:/sbin", "SUID=" + suid, "CAPBIN=" + capBin, "GROUPFILE=" + os.Getenv(envGroupFile)}, Stdout: out, Stderr: out, Containment: mode})
		select {
		case <-c.Done():
		case <-time.After(testDeadline):
			t.Fatalf("%s: the child did not exit", mode)
		}
		// Done comes when the child is reaped; its last lines may still be
		// in the pipe. Stop delivers them.
		stopOK(t, c, context.Background())
		if st := c.Exit(); st.ExitCode() != 0 {
			t.Fatalf("%s: the child exited %d: %s", mode, st.ExitCode(), out.String())
		}
		got := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			k, v, _ := strings.Cut(l, " ")
			got[k] = v
		}
		t.Logf("uid %d, %s: %q", uid, mode, got)
		return got
	}
	in, host := view(ContainUserns), view(ContainPgroup)
	checks := []struct {
		name, key, want string
	}{
		{name: "its own uid and gid", key: "id", want: fmt.Sprintf("%d %d", uid, gid)},
		{name: "its own files are its own", key: "own-file", want: fmt.Sprintf("%d:%d", uid, gid)},
		{name: "setgroups denied", key: "setgroups", want: "deny"},
		{name: "identity map", key: "uid_map", want: fmt.Sprintf(" %d %d 1", uid, uid)},
	}
	if uid != 0 {
		checks = append(checks, []struct{ name, key, want string }{
			{name: "root's files show as nobody", key: "root-file", want: "65534:65534"},
			{name: "no capabilities", key: "capeff", want: "CapEff:0000000000000000"},
		}...)
		if os.Getenv(envGroupFile) != "" {
			checks = append(checks, []struct{ name, key, want string }{
				{name: "an unmapped supplementary group shows as nogroup", key: "supplementary", want: strconv.Itoa(nobody)},
				{name: "an unmapped supplementary group still grants access", key: "group-file", want: "adm-only"},
			}...)
		}
		if suid != "" {
			checks = append(checks, struct{ name, key, want string }{name: "set-user-ID root gains nothing", key: "setuid",
				want: fmt.Sprintf("%d %d 0 Operation not permitted", uid, uid)})
		}
		if capBin != "" {
			// The kernel grants the file's cap_net_raw, but in the user
			// namespace, which owns no network namespace: no raw socket.
			checks = append(checks, struct{ name, key, want string }{name: "a file capability gains nothing", key: "filecap",
				want: fmt.Sprintf("%d %d 2000 Operation not permitted", uid, uid)})
		}
	}
	for _, c := range checks {
		if got := in[c.key]; got != c.want {
			t.Errorf("%s: %s is %q in the user namespace, want %q", c.name, c.key, got, c.want)
		}
	}
	if uid != 0 && suid != "" && !strings.HasPrefix(host["setuid"], fmt.Sprintf("%d 0 ", uid)) {
		t.Errorf("the control failed: outside the user namespace showid-suid says %q, want euid 0", host["setuid"])
	}
	if uid != 0 && capBin != "" && host["filecap"] != fmt.Sprintf("%d %d 2000 raw", uid, uid) {
		t.Errorf("the control failed: outside the user namespace showid-cap says %q, want CapEff 2000 (cap_net_raw) and a raw socket", host["filecap"])
	}
}
