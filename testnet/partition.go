package testnet

import (
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

// Every node namespace of a network-namespace testnet gets one nftables
// table (created on first use) with an input-hook chain that drops packets
// from the addresses in the set "cut" (partitions) and jumps to the chain
// "loss" (random loss on eth0). Faults act on the receiving side: a rule on
// an output hook is not silent loss (the sender's sendto fails with EPERM).
const nftTable = `table inet bedwe {
	set cut { type ipv4_addr; }
	chain loss { }
	chain input {
		type filter hook input priority 0; policy accept;
		ip saddr @cut drop
		iifname "eth0" jump loss
	}
}
`

// requireNetns fails unless the testnet runs in network namespaces.
func (m *Manifest) requireNetns() error {
	if m.Netns == nil {
		return fmt.Errorf("the testnet in %s does not run in network namespaces (start it with `bedwe testnet up --netns`)", m.Dir)
	}
	return nil
}

// nft runs nft in node i's namespace, creating the testnet's table first
// when it is missing.
func (m *Manifest) nft(i int, script string) error {
	ns := m.Nodes[i].Namespace
	if exec.Command("ip", "netns", "exec", ns, "nft", "list", "table", "inet", "bedwe").Run() != nil {
		if err := runIn(nftTable, "ip", "netns", "exec", ns, "nft", "-f", "-"); err != nil {
			return fmt.Errorf("node %d: create nftables table: %w", i, err)
		}
	}
	if err := runIn(script, "ip", "netns", "exec", ns, "nft", "-f", "-"); err != nil {
		return fmt.Errorf("node %d: %w", i, err)
	}
	return nil
}

// Select resolves a node or zone name to node indexes: a zone name (every
// node of the zone), a node index, or a prefix or suffix of a peer ID.
func (m *Manifest) Select(name string) ([]int, error) {
	var idx []int
	if slices.Contains(m.Zones, name) {
		for i, nd := range m.Nodes {
			if nd.Zone == name {
				idx = append(idx, i)
			}
		}
		return idx, nil
	}
	if i, err := strconv.Atoi(name); err == nil {
		if i < 0 || i >= len(m.Nodes) {
			return nil, fmt.Errorf("node %d: the testnet has nodes 0 to %d", i, len(m.Nodes)-1)
		}
		return []int{i}, nil
	}
	for i, nd := range m.Nodes {
		if name != "" && (strings.HasPrefix(nd.PeerID, name) || strings.HasSuffix(nd.PeerID, name)) {
			idx = append(idx, i)
		}
	}
	if len(idx) != 1 {
		return nil, fmt.Errorf("%q names no zone (%s), node index or single peer ID (%d match)", name, strings.Join(m.Zones, ", "), len(idx))
	}
	return idx, nil
}

// Partition cuts every link between the nodes in a and those in b, both
// ways (each side drops what the other sends it). An empty b means every
// node not in a. It adds to any partition already in place; Heal removes
// them all.
func (m *Manifest) Partition(a, b []int) error {
	if err := m.requireNetns(); err != nil {
		return err
	}
	if len(b) == 0 {
		for i := range m.Nodes {
			if !slices.Contains(a, i) {
				b = append(b, i)
			}
		}
	}
	cut := map[int][]string{}
	for _, i := range a {
		for _, k := range b {
			if i == k {
				return fmt.Errorf("node %d is on both sides of the partition", i)
			}
			cut[i] = append(cut[i], m.Nodes[k].Addr)
			cut[k] = append(cut[k], m.Nodes[i].Addr)
		}
	}
	var errs []error
	for i, addrs := range cut {
		errs = append(errs, m.nft(i, "add element inet bedwe cut { "+strings.Join(addrs, ", ")+" }\n"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("partition: %w", err)
	}
	return nil
}

// CutOneWay has every node in to drop what the nodes in from send it, and
// nothing more: from still hears to. On a connection already open, what
// a node in to sends arrives and the answers do not (nor do the
// acknowledgements: it sends again, and the far side drops the copies);
// a new connection from to is never made (the handshake's answer is
// lost). Heal removes it with the partitions.
func (m *Manifest) CutOneWay(to, from []int) error {
	if err := m.requireNetns(); err != nil {
		return err
	}
	var errs []error
	for _, i := range to {
		var addrs []string
		for _, k := range from {
			if i == k {
				return fmt.Errorf("node %d is on both sides of the cut", i)
			}
			addrs = append(addrs, m.Nodes[k].Addr)
		}
		errs = append(errs, m.nft(i, "add element inet bedwe cut { "+strings.Join(addrs, ", ")+" }\n"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("one-way cut: %w", err)
	}
	return nil
}

// Heal removes every partition (loss and rate limits stay).
func (m *Manifest) Heal() error {
	if err := m.requireNetns(); err != nil {
		return err
	}
	var errs []error
	for i := range m.Nodes {
		errs = append(errs, m.nft(i, "flush set inet bedwe cut\n"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("heal: %w", err)
	}
	return nil
}

// LinkOptions shape one node's link.
type LinkOptions struct {
	// LossPct drops this percentage of the packets the node receives on
	// its link (0: none; negative: leave as is).
	LossPct int
	// Rate limits the link both ways with a token bucket (tc tbf), in tc's
	// units ("1mbit", "256kbit"); "off" removes the limit, "" leaves it.
	Rate string
}

// Link shapes node i's link: random loss on what it receives (nftables,
// in its namespace) and a rate limit on both ends of its veth (tc tbf).
func (m *Manifest) Link(i int, o LinkOptions) error {
	if err := m.requireNetns(); err != nil {
		return err
	}
	if i < 0 || i >= len(m.Nodes) {
		return fmt.Errorf("node %d: the testnet has nodes 0 to %d", i, len(m.Nodes)-1)
	}
	if o.LossPct > 100 {
		return fmt.Errorf("loss %d%%: want 0 to 100", o.LossPct)
	}
	nd := &m.Nodes[i]
	if o.LossPct >= 0 {
		script := "flush chain inet bedwe loss\n"
		if o.LossPct > 0 {
			script += fmt.Sprintf("add rule inet bedwe loss numgen random mod 100 < %d drop\n", o.LossPct)
		}
		if err := m.nft(i, script); err != nil {
			return fmt.Errorf("link loss: %w", err)
		}
	}
	for _, end := range [][2]string{{nd.Namespace, nodeDev}, {m.Netns.Bridge, nd.Veth}} {
		switch o.Rate {
		case "":
		case "off":
			// Deleting a root qdisc that is not there fails: that is "off" too.
			_ = run("ip", "netns", "exec", end[0], "tc", "qdisc", "del", "dev", end[1], "root")
		default:
			if err := run("ip", "netns", "exec", end[0], "tc", "qdisc", "replace", "dev", end[1], "root",
				"tbf", "rate", o.Rate, "burst", "32kbit", "latency", "400ms"); err != nil {
				return fmt.Errorf("node %d: link rate: %w", i, err)
			}
		}
	}
	return nil
}

// LinkState is what the fault rules of one node's namespace say.
type LinkState struct {
	Node      int    `json:"node"`
	Zone      string `json:"zone"`
	Namespace string `json:"namespace"`
	Addr      string `json:"addr"`
	// Cut lists the addresses the node drops everything from.
	Cut []string `json:"cut"`
	// LossPct is the random loss on what it receives.
	LossPct int `json:"loss_pct"`
	// Qdisc is the root qdisc of its interface (tc's words).
	Qdisc string `json:"qdisc"`
}

// Links reports every node's fault rules.
func (m *Manifest) Links() ([]LinkState, error) {
	if err := m.requireNetns(); err != nil {
		return nil, err
	}
	out := make([]LinkState, 0, len(m.Nodes))
	for i := range m.Nodes {
		nd := &m.Nodes[i]
		st := LinkState{Node: i, Zone: nd.Zone, Namespace: nd.Namespace, Addr: nd.Addr, Cut: []string{}}
		if b, err := exec.Command("ip", "netns", "exec", nd.Namespace, "nft", "list", "table", "inet", "bedwe").Output(); err == nil {
			text := string(b)
			if k := strings.Index(text, "elements = {"); k >= 0 {
				end := strings.Index(text[k:], "}")
				for _, a := range strings.Split(text[k+len("elements = {"):k+end], ",") {
					if a = strings.TrimSpace(a); a != "" {
						st.Cut = append(st.Cut, a)
					}
				}
			}
			if k := strings.Index(text, "mod 100 < "); k >= 0 {
				f := strings.Fields(text[k+len("mod 100 < "):])
				if len(f) > 0 {
					st.LossPct, _ = strconv.Atoi(f[0])
				}
			}
		}
		if b, err := exec.Command("ip", "netns", "exec", nd.Namespace, "tc", "qdisc", "show", "dev", nodeDev, "root").Output(); err == nil {
			st.Qdisc = strings.TrimSpace(string(b))
		}
		out = append(out, st)
	}
	return out, nil
}
