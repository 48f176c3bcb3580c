package torture

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A ZooKeeper member cut off from its peers (partition-zk). testenv runs
// the members as plain processes on loopback with no proxy between them,
// so the cut is a kernel filter in an nftables table of its own, on the
// output hook (every packet on loopback is sent by a local socket):
//
//   - every packet to or from the member's own quorum and election ports
//     (its peers' connections to it);
//   - every packet of a connection the member holds to a peer's quorum or
//     election port when the cut begins (found by the socket inodes of its
//     file descriptors in /proc/PID/net/tcp{,6});
//   - every packet a socket the member opens later sends to those ports:
//     the member is moved into a cgroup (v2) of its own first, and the rule
//     matches that cgroup (a socket belongs to the cgroup of the process
//     that created it, so the connections above need rules of their own).
//
// Its clients' connections (electd's, through their proxies to its client
// port) are left alone: a follower cut off from its leader answers them,
// reads included, for up to syncLimit·tickTime, then closes them; its
// Syncs fail. The heal deletes the table and moves the member back.
type zkCut struct {
	c     *cluster
	pid   int
	group string // the cgroup's directory
	path  string // the cgroup's path as nft names it (under /sys/fs/cgroup)
	table string
	conns int // the member's peer connections found at the cut
}

// zkPorts are an ensemble's quorum and election ports, per server id, as
// a member's "conf" tells them.
type zkPorts map[int][2]string

// injectZKPartition cuts a member off from its peers for 0.5–2.5 TTL, then
// heals the cut and waits until every member serves under one leader.
func (c *cluster) injectZKPartition(f *fault, rng *rand.Rand, lead *node) {
	e := c.zkEnsemble()
	i, why := c.zkTarget(f, rng, lead)
	leader := c.zkLeaderIndex(f)
	m, d := e.Members()[i], between(rng, c.cfg.ttl, 0.5, 2.5)
	f.note = fmt.Sprintf("z%d (%s) cut off from its peers for %s", i, why, d)
	if err := zkCutSupported(); err != nil {
		// The environment, not the ensemble: counted, noted, not applied.
		f.at = time.Now()
		f.healed = f.at
		f.note += "; NOT APPLIED: " + err.Error()
		c.t.Logf("torture %s: partition-zk not applied: %v", c.s.Name, err)
		return
	}
	ports, self, err := readZKPorts(m.Addr())
	if err != nil {
		c.fatalf(f, "partition-zk: %v", err)
	}
	f.at = time.Now()
	cut, err := c.cutZK(m.Pid(), self, ports)
	if err != nil {
		c.fatalf(f, "partition-zk: %v", err)
	}
	f.note += fmt.Sprintf(" (%d peer connections of its own at the cut)", cut.conns)
	if i == leader {
		if now, ok := c.awaitZKLeaderBy(i, f.at.Add(d)); ok {
			f.note += fmt.Sprintf("; z%d led the others after %s", now, ms(time.Since(f.at)))
		} else {
			f.note += "; no other leader while it lasted"
		}
	}
	time.Sleep(time.Until(f.at.Add(d))) // the partition's length is the experiment
	if err := cut.heal(); err != nil {
		c.fatalf(f, "partition-zk: %v", err)
	}
	c.awaitZKQuorum(f)
	f.healed = time.Now()
	f.note += fmt.Sprintf("; %s after the heal", c.zkModes())
}

// awaitZKLeaderBy waits, until the deadline, for the members other than
// old to follow one of them, and returns its index.
func (c *cluster) awaitZKLeaderBy(old int, deadline time.Time) (int, bool) {
	for time.Now().Before(deadline) {
		leader, followers := -1, 0
		for i, m := range c.zkEnsemble().Members() {
			switch {
			case i == old:
			case m.Mode() == "leader":
				leader = i
			case m.Mode() == "follower":
				followers++
			}
		}
		if leader >= 0 && followers == len(c.zkEnsemble().Members())-2 {
			return leader, true
		}
		time.Sleep(settlePoll) // polling the members with a deadline
	}
	return -1, false
}

// zkCutSupported says why this host cannot cut a member off its peers:
// the cut needs root, nft and a cgroup v2 hierarchy under /sys/fs/cgroup.
func zkCutSupported() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("cutting a zookeeper member off its peers needs root (euid %d)", os.Geteuid())
	}
	if _, err := exec.LookPath("nft"); err != nil {
		return fmt.Errorf("nft not found (apt-get install -y nftables): %w", err)
	}
	_, _, err := cgroup2Root()
	return err
}

// readZKPorts asks the member at addr for its configuration ("conf"): the
// quorum and election ports of every server, and its own server id.
func readZKPorts(addr string) (zkPorts, int, error) {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, 0, fmt.Errorf("conf of %s: %w", addr, err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		return nil, 0, fmt.Errorf("conf of %s: %w", addr, err)
	}
	if _, err := io.WriteString(conn, "conf"); err != nil {
		return nil, 0, fmt.Errorf("conf of %s: %w", addr, err)
	}
	b, err := io.ReadAll(conn)
	if err != nil {
		return nil, 0, fmt.Errorf("conf of %s: %w", addr, err)
	}
	ports, self := zkPorts{}, 0
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if v, ok := strings.CutPrefix(line, "serverId="); ok {
			self, _ = strconv.Atoi(v)
			continue
		}
		// server.N=HOST:QUORUM:ELECTION[:participant][;CLIENT]
		k, v, ok := strings.Cut(line, "=")
		id, err := strconv.Atoi(strings.TrimPrefix(k, "server."))
		if !ok || !strings.HasPrefix(k, "server.") || err != nil {
			continue
		}
		v, _, _ = strings.Cut(v, ";")
		parts := strings.Split(v, ":")
		if len(parts) < 3 {
			return nil, 0, fmt.Errorf("conf of %s: %q", addr, line)
		}
		ports[id] = [2]string{parts[1], parts[2]}
	}
	if _, ok := ports[self]; !ok || len(ports) < 2 {
		return nil, 0, fmt.Errorf("conf of %s names no ensemble with server %d: %q", addr, self, b)
	}
	return ports, self, nil
}

// cgroup2Root is where the cgroup v2 hierarchy is mounted, and its path
// under /sys/fs/cgroup, where nft looks a cgroupv2 path up.
func cgroup2Root() (string, string, error) {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return "", "", fmt.Errorf("read mounts: %w", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		fs := strings.Fields(line)
		if len(fs) >= 3 && fs[2] == "cgroup2" {
			rel, err := filepath.Rel("/sys/fs/cgroup", fs[1])
			if err != nil || strings.HasPrefix(rel, "..") {
				continue
			}
			return fs[1], rel, nil
		}
	}
	return "", "", fmt.Errorf("no cgroup v2 hierarchy under /sys/fs/cgroup: cannot cut a zookeeper member off its peers")
}

// cutZK cuts the member with pid (server id self) off from its peers.
func (c *cluster) cutZK(pid, self int, ports zkPorts) (*zkCut, error) {
	root, rel, err := cgroup2Root()
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("electd-zkcut-%d-%d", os.Getpid(), pid)
	cut := &zkCut{c: c, pid: pid, group: filepath.Join(root, name), path: filepath.Join(rel, name),
		table: fmt.Sprintf("electd_zkcut_%d_%d", os.Getpid(), pid)}
	if err := os.Mkdir(cut.group, 0o755); err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	c.t.Cleanup(func() {
		if err := cut.heal(); err != nil {
			c.t.Errorf("partition-zk cleanup: %v", err)
		}
	})
	if err := os.WriteFile(filepath.Join(cut.group, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		return nil, fmt.Errorf("move zookeeper %d into %s: %w", pid, cut.group, err)
	}
	own := []string{ports[self][0], ports[self][1]}
	var others []string
	for id, p := range ports {
		if id != self {
			others = append(others, p[0], p[1])
		}
	}
	script := fmt.Sprintf(`add table inet %[1]s
add chain inet %[1]s out { type filter hook output priority 0; policy accept; }
add rule inet %[1]s out tcp dport { %[2]s } drop
add rule inet %[1]s out tcp sport { %[2]s } drop
add rule inet %[1]s out socket cgroupv2 level %[3]d "%[4]s" tcp dport { %[5]s } drop
`, cut.table, strings.Join(own, ", "), 1, cut.path, strings.Join(others, ", "))
	// The connections the member opened before it was moved: after the
	// move, so that none opened in between is missed.
	conns, err := peerConns(pid, others)
	if err != nil {
		return nil, err
	}
	for _, cn := range conns {
		script += fmt.Sprintf("add rule inet %[1]s out tcp sport %[2]s tcp dport %[3]s drop\nadd rule inet %[1]s out tcp sport %[3]s tcp dport %[2]s drop\n",
			cut.table, cn[0], cn[1])
	}
	cut.conns = len(conns)
	if err := nft(script); err != nil {
		return nil, err
	}
	return cut, nil
}

// heal removes the cut's table and moves the member back to the root
// cgroup (it may be gone: a cleanup after a failure); again does nothing.
func (cut *zkCut) heal() error {
	if cut.table == "" {
		return nil
	}
	var errs []string
	if err := nft("delete table inet " + cut.table + "\n"); err != nil && !strings.Contains(err.Error(), "No such file") {
		errs = append(errs, err.Error())
	}
	root := filepath.Dir(cut.group)
	if err := os.WriteFile(filepath.Join(root, "cgroup.procs"), []byte(strconv.Itoa(cut.pid)), 0o644); err != nil && !os.IsNotExist(err) &&
		!strings.Contains(err.Error(), "no such process") {
		errs = append(errs, fmt.Sprintf("move zookeeper %d back: %v", cut.pid, err))
	}
	if err := os.Remove(cut.group); err != nil && !os.IsNotExist(err) {
		errs = append(errs, fmt.Sprintf("remove %s: %v", cut.group, err))
	}
	cut.table = ""
	if len(errs) > 0 {
		return fmt.Errorf("heal: %s", strings.Join(errs, "; "))
	}
	return nil
}

// peerConns are the TCP connections of process pid to one of ports, as
// (local port, remote port) pairs in decimal.
func peerConns(pid int, ports []string) ([][2]string, error) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil, fmt.Errorf("sockets of %d: %w", pid, err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	var out [][2]string
	for _, tab := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, tab))
		if err != nil {
			return nil, fmt.Errorf("sockets of %d: %w", pid, err)
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			fs := strings.Fields(line)
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			if len(fs) < 10 || !inodes[fs[9]] {
				continue
			}
			local, remote := hexPort(fs[1]), hexPort(fs[2])
			if local != "" && slices.Contains(ports, remote) {
				out = append(out, [2]string{local, remote})
			}
		}
	}
	return out, nil
}

// hexPort is the decimal port of a /proc/net/tcp address ("0100007F:1F90").
func hexPort(addr string) string {
	_, h, ok := strings.Cut(addr, ":")
	if !ok {
		return ""
	}
	p, err := strconv.ParseUint(h, 16, 16)
	if err != nil {
		return ""
	}
	return strconv.FormatUint(p, 10)
}

// nft runs an nftables script.
func nft(script string) error {
	cmd := exec.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft -f - (%s): %w: %s", strings.TrimSpace(script), err, out)
	}
	return nil
}
