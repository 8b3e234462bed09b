package testnet

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// DefaultSubnet is the private subnet a network-namespace testnet uses
// unless told otherwise. Its addresses exist only inside the namespaces the
// testnet creates and on its one host-side link.
const DefaultSubnet = "10.77.0.0/24"

// Netns describes the network namespaces of a testnet started with
// Options.Netns: every node runs in a namespace of its own (NodeNS) with a
// veth (eth0 inside, Node.Veth on the bridge side) to a bridge (br0) that
// lives in a namespace of its own (Bridge), so the root namespace's
// routing is untouched but for one link: HostLink, a veth from the root
// namespace into the bridge with HostAddr, through which clients of the
// testnet (the CLI, the harness) reach the nodes. Every name starts with
// "bedwe-ID", so `bedwe testnet down` finds what it created even when the
// processes are gone.
type Netns struct {
	// ID is a short random name shared by every namespace and link.
	ID       string `json:"id"`
	Subnet   string `json:"subnet"`
	Bridge   string `json:"bridge_ns"`
	HostLink string `json:"host_link"`
	HostAddr string `json:"host_addr"`
}

// bridgeDev is the bridge's name inside the bridge namespace, and nodeDev a
// node's interface inside its own namespace.
const (
	bridgeDev = "br0"
	nodeDev   = "eth0"
)

// ErrNeedRoot is returned by Up with Options.Netns when this process is not
// root: network namespaces and veth pairs need CAP_NET_ADMIN.
var ErrNeedRoot = errors.New("network namespaces need root (run as root, or drop --netns)")

// NetnsAvailable reports whether this process can create network
// namespaces (root, with ip and nft on the PATH), and why not.
func NetnsAvailable() error {
	if os.Geteuid() != 0 {
		return ErrNeedRoot
	}
	for _, tool := range []string{"ip", "nft", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("network namespaces: %s not found on PATH (Debian: iproute2, nftables)", tool)
		}
	}
	return nil
}

// nodeNS is the namespace name of node i.
func (n *Netns) nodeNS(i int) string { return "bedwe-" + n.ID + "-" + strconv.Itoa(i) }

// run runs a command and wraps its output into the error when it fails.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// runIn runs a command with its standard input.
func runIn(stdin, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// planNetns fills the Netns of m and each node's namespace, address and
// veth name (nothing is created yet).
func (m *Manifest) planNetns(subnet string) error {
	if subnet == "" {
		subnet = DefaultSubnet
	}
	p, err := netip.ParsePrefix(subnet)
	if err != nil || !p.Addr().Is4() {
		return fmt.Errorf("--subnet %q: want an IPv4 prefix such as %s", subnet, DefaultSubnet)
	}
	p = p.Masked()
	if !p.Addr().IsPrivate() {
		return fmt.Errorf("--subnet %s: use a private range (10/8, 172.16/12, 192.168/16)", p)
	}
	size := 1 << (32 - p.Bits())
	if size < len(m.Nodes)+3 {
		return fmt.Errorf("--subnet %s has room for %d addresses, fewer than %d nodes and the host link", p, size-3, len(m.Nodes))
	}
	id := strings.TrimPrefix(m.Network, "testnet-")
	if len(id) > 6 {
		id = id[:6]
	}
	n := &Netns{ID: id, Subnet: p.String(), Bridge: "bedwe-" + id + "-br", HostLink: "bedwe-" + id}
	addr := func(k int) netip.Addr {
		a := p.Addr()
		for range k {
			a = a.Next()
		}
		return a
	}
	n.HostAddr = addr(size - 2).String()
	for i := range m.Nodes {
		nd := &m.Nodes[i]
		nd.Namespace = n.nodeNS(i)
		nd.Addr = addr(i + 1).String()
		nd.Veth = "n" + strconv.Itoa(i)
		nd.Listen = "/ip4/" + nd.Addr + "/tcp/0"
	}
	m.Netns = n
	return nil
}

// createNetns creates the bridge namespace, the host link and every node's
// namespace and veth. The caller saves the manifest first, so that a crash
// half-way leaves enough for Down to remove.
func (m *Manifest) createNetns() error {
	n := m.Netns
	if out, _ := exec.Command("ip", "route", "show", "exact", n.Subnet).Output(); len(bytes.TrimSpace(out)) > 0 {
		return fmt.Errorf("subnet %s is already routed in the root namespace (%s): pick another --subnet", n.Subnet, bytes.TrimSpace(out))
	}
	bits := strings.SplitN(n.Subnet, "/", 2)[1]
	steps := [][]string{
		{"netns", "add", n.Bridge},
		{"-n", n.Bridge, "link", "set", "lo", "up"},
		{"-n", n.Bridge, "link", "add", bridgeDev, "type", "bridge"},
		{"-n", n.Bridge, "link", "set", bridgeDev, "up"},
		{"link", "add", n.HostLink, "type", "veth", "peer", "name", "host", "netns", n.Bridge},
		{"-n", n.Bridge, "link", "set", "host", "master", bridgeDev, "up"},
		{"addr", "add", n.HostAddr + "/" + bits, "dev", n.HostLink},
		{"link", "set", n.HostLink, "up"},
	}
	for i := range m.Nodes {
		nd := &m.Nodes[i]
		steps = append(steps,
			[]string{"netns", "add", nd.Namespace},
			[]string{"-n", nd.Namespace, "link", "set", "lo", "up"},
			[]string{"link", "add", nodeDev, "netns", nd.Namespace, "type", "veth", "peer", "name", nd.Veth, "netns", n.Bridge},
			[]string{"-n", n.Bridge, "link", "set", nd.Veth, "master", bridgeDev, "up"},
			[]string{"-n", nd.Namespace, "addr", "add", nd.Addr + "/" + bits, "dev", nodeDev},
			[]string{"-n", nd.Namespace, "link", "set", nodeDev, "up"},
		)
	}
	for _, s := range steps {
		if err := run("ip", s...); err != nil {
			return fmt.Errorf("create the testnet's network namespaces: %w", err)
		}
	}
	return nil
}

// removeNetns kills any process left in the testnet's namespaces and
// deletes them and the host link. Missing ones are fine: it runs after a
// crash half-way through Up, and twice.
func (m *Manifest) removeNetns() error {
	n := m.Netns
	if n == nil {
		return nil
	}
	names := []string{}
	for i := range m.Nodes {
		names = append(names, m.Nodes[i].Namespace)
	}
	names = append(names, n.Bridge)
	for _, ns := range names {
		if !netnsExists(ns) {
			continue
		}
		if out, err := exec.Command("ip", "netns", "pids", ns).Output(); err == nil {
			for _, f := range strings.Fields(string(out)) {
				if pid, err := strconv.Atoi(f); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
	}
	var errs []error
	// The host link first: deleting the bridge namespace deletes it too,
	// asynchronously, and a delete racing that fails.
	if err := run("ip", "link", "del", n.HostLink); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
		errs = append(errs, err)
	}
	for _, ns := range names {
		if !netnsExists(ns) {
			continue
		}
		if err := run("ip", "netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func netnsExists(name string) bool {
	_, err := os.Stat("/run/netns/" + name)
	return err == nil
}
