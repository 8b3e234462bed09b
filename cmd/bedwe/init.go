package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
	"github.com/urfave/cli/v2"
	"gopkg.in/yaml.v3"

	"github.com/bedwe/bedwe/internal/atomicfile"
	"github.com/bedwe/bedwe/node"
	"github.com/bedwe/bedwe/node/member"
	"github.com/bedwe/bedwe/node/service"
	"github.com/bedwe/bedwe/schedule"
)

// servicesTemplateFile is the services file bedwe init writes beside the
// node config.
const servicesTemplateFile = "services.yaml"

func initCommand() *cli.Command {
	return &cli.Command{
		Name:  "init",
		Usage: "set up a node's data directory: identity, config.yaml and a services file",
		Description: `Prepares DATA for bedwe node: creates the identity key (kept if it exists, so the
peer ID never changes), writes DATA/config.yaml with the zone, listen addresses,
bootstrap peers and services file (every other node flag listed, commented, at its
default) and DATA/services.yaml, a commented template (kept if it exists). Then
bedwe node --data DATA needs no other flag.

For a private mesh it also takes the mesh's membership files: --swarm-key (the
pre-shared key made once by bedwe swarm-key), --trusted-peers (the members' peer IDs)
and --clients (client IDs allowed to submit); each is checked, copied into DATA (the
key with mode 0600) and named in config.yaml. It creates DATA/client.key, the key of
this board's own CLI, and prints its ID too (for other boards' clients files, so this
board's bedwe submit --wait is answered by them).

It prints what a neighbour needs: this node's addresses with its peer ID (for their
--join, or bootstrap: in their config.yaml, and their trusted-peers file) and its public
key (for their --trust or trusted-keys file, to accept timetables this node signs; as
bedwe schedule key prints it). An existing config.yaml is not replaced without --force.

Examples:
   bedwe init --data /var/lib/bedwe --zone block-7
   bedwe init --data ~/.bedwe --zone block-9 --join /ip4/192.168.1.7/tcp/4001/p2p/12D3KooW...
   bedwe init --data /tmp/n1 --zone a --listen /ip4/127.0.0.1/tcp/4101 -o json
   bedwe init --data /var/lib/bedwe --zone block-7 --swarm-key swarm.key --trusted-peers trusted-peers --clients clients`,
		Flags: []cli.Flag{
			dataFlag(),
			&cli.StringFlag{Name: "zone", Usage: "load-shedding zone this board is in (required)", EnvVars: []string{"BEDWE_ZONE"}},
			&cli.StringSliceFlag{Name: "join", Usage: "full multiaddr (with /p2p/ID) of a neighbour to join through; written as bootstrap (repeatable)"},
			&cli.StringSliceFlag{Name: "listen", Usage: "multiaddr to listen on (repeatable)", Value: cli.NewStringSlice("/ip4/0.0.0.0/tcp/4001")},
			&cli.StringFlag{Name: "network", Usage: "mesh name to write (peers only see peers of the same network); default: the node's"},
			&cli.BoolFlag{Name: "force", Usage: "replace an existing config.yaml (the identity and services.yaml are kept)"},
			&cli.StringFlag{Name: "swarm-key", Usage: "the mesh's pre-shared key FILE (bedwe swarm-key): copied to DATA/swarm.key (mode 0600) and named in config.yaml", TakesFile: true},
			&cli.StringFlag{Name: "trusted-peers", Usage: "FILE of the mesh's member peer IDs: copied to DATA/trusted-peers and named in config.yaml", TakesFile: true},
			&cli.StringFlag{Name: "clients", Usage: "FILE of client peer IDs allowed to submit: copied to DATA/clients and named in config.yaml", TakesFile: true},
			outputFlag(),
		},
		Action: runInit,
	}
}

// initReport is what init prints with -o json.
type initReport struct {
	Data            string   `json:"data"`
	PeerID          string   `json:"peer_id"`
	Zone            string   `json:"zone"`
	Config          string   `json:"config"`
	Services        string   `json:"services"`
	ServicesWritten bool     `json:"services_written"`
	IdentityCreated bool     `json:"identity_created"`
	Addrs           []string `json:"addrs"`
	PublicKey       string   `json:"public_key"`
	Fingerprint     string   `json:"fingerprint"`
	// ClientID is the peer ID of this board's own CLI (DATA/client.key).
	ClientID string `json:"client_id"`
	// SwarmKey, TrustedPeers and Clients are the membership files copied
	// into DATA (empty: not given).
	SwarmKey     string `json:"swarm_key,omitempty"`
	TrustedPeers string `json:"trusted_peers,omitempty"`
	Clients      string `json:"clients,omitempty"`
}

func runInit(c *cli.Context) error {
	if c.Args().Present() {
		return cli.Exit(fmt.Sprintf("init takes no arguments (got %q); see bedwe init --help", c.Args().First()), 1)
	}
	asJSON, err := jsonOutput(c)
	if err != nil {
		return err
	}
	zone := strings.TrimSpace(c.String("zone"))
	if zone == "" {
		return cli.Exit("init needs --zone: the load-shedding zone this board is in (e.g. --zone block-7)", 1)
	}
	var listen []ma.Multiaddr
	for _, s := range c.StringSlice("listen") {
		a, err := ma.NewMultiaddr(s)
		if err != nil {
			return cli.Exit(fmt.Sprintf("--listen %q: %v", s, err), 1)
		}
		listen = append(listen, a)
	}
	for _, s := range c.StringSlice("join") {
		if _, err := peer.AddrInfoFromString(s); err != nil {
			return cli.Exit(fmt.Sprintf("--join %q: want a full multiaddr ending in /p2p/PEER-ID (as bedwe init prints it on the neighbour): %v", s, err), 1)
		}
	}
	dir, err := filepath.Abs(c.String("data"))
	if err != nil {
		return cli.Exit(fmt.Sprintf("--data: %v", err), 1)
	}
	cfgPath := filepath.Join(dir, nodeConfigFile)
	if _, err := os.Stat(cfgPath); err == nil && !c.Bool("force") {
		return cli.Exit(fmt.Sprintf("%s exists: bedwe init does not replace it (--force does; the identity and services.yaml are kept)", cfgPath), 1)
	}
	// Membership files are checked before anything is written.
	type memberFile struct {
		flag, name string
		mode       os.FileMode
		check      func(string) error
		data       []byte
	}
	members := []*memberFile{
		{flag: "swarm-key", name: "swarm.key", mode: 0o600, check: func(p string) error { _, err := member.ReadSwarmKey(p); return err }},
		{flag: "trusted-peers", name: "trusted-peers", mode: 0o644, check: func(p string) error { _, err := member.ReadPeerList(p); return err }},
		{flag: "clients", name: "clients", mode: 0o644, check: func(p string) error { _, err := member.ReadPeerList(p); return err }},
	}
	for _, m := range members {
		src := c.String(m.flag)
		if src == "" {
			continue
		}
		if err := m.check(src); err != nil {
			return cli.Exit(fmt.Sprintf("--%s: %v", m.flag, err), 1)
		}
		data, err := os.ReadFile(src)
		if err != nil {
			return cli.Exit(fmt.Sprintf("--%s: %v", m.flag, err), 1)
		}
		m.data = data
	}
	pub, id, created, err := node.InitIdentity(dir)
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	clientKey, err := member.LoadOrCreateKey(filepath.Join(dir, "client.key"))
	if err != nil {
		return cli.Exit(fmt.Sprintf("client key: %v", err), 1)
	}
	clientID, err := member.KeyID(clientKey)
	if err != nil {
		return cli.Exit(fmt.Sprintf("client key: %v", err), 1)
	}
	settings := initSettings{data: dir, peerID: id, zone: zone, listen: c.StringSlice("listen"), bootstrap: c.StringSlice("join"), network: c.String("network")}
	for _, m := range members {
		if m.data == nil {
			continue
		}
		dst := filepath.Join(dir, m.name)
		if err := atomicfile.Write(dst, m.data, m.mode); err != nil {
			return cli.Exit(fmt.Sprintf("--%s: %v", m.flag, err), 1)
		}
		settings.members = append(settings.members, [2]string{m.flag, dst})
	}
	rep := initReport{
		Data: dir, PeerID: id, Zone: zone, Config: cfgPath,
		Services: filepath.Join(dir, servicesTemplateFile), IdentityCreated: created,
		PublicKey: schedule.FormatPublicKey(pub), Fingerprint: schedule.Fingerprint(pub),
		ClientID: clientID.String(),
	}
	for _, m := range settings.members {
		switch m[0] {
		case "swarm-key":
			rep.SwarmKey = m[1]
		case "trusted-peers":
			rep.TrustedPeers = m[1]
		case "clients":
			rep.Clients = m[1]
		}
	}
	switch _, err := os.Stat(rep.Services); {
	case errors.Is(err, fs.ErrNotExist):
		if err := checkServicesTemplate(); err != nil {
			return cli.Exit(fmt.Sprintf("bedwe init's services template is invalid (a bug): %v", err), 1)
		}
		if err := atomicfile.Write(rep.Services, []byte(servicesTemplate), 0o644); err != nil {
			return cli.Exit(fmt.Sprintf("write services template: %v", err), 1)
		}
		rep.ServicesWritten = true
	case err != nil:
		return cli.Exit(fmt.Sprintf("services file: %v", err), 1)
	}
	settings.services = rep.Services
	cfg := nodeConfigText(settings, nodeCommand().Flags)
	// What init writes, bedwe node must read.
	if _, err := parseNodeConfig(cfgPath, cfg, nodeCommand().Flags); err != nil {
		return cli.Exit(fmt.Sprintf("bedwe init wrote an invalid config (a bug): %v", err), 1)
	}
	if err := atomicfile.Write(cfgPath, cfg, 0o644); err != nil {
		return cli.Exit(fmt.Sprintf("write node config: %v", err), 1)
	}
	rep.Addrs = neighbourAddrs(listen, id)
	if asJSON {
		return printJSON(rep)
	}
	printInit(c.App.Writer, rep)
	return nil
}

func printInit(w io.Writer, rep initReport) {
	fmt.Fprintf(w, "initialised bedwe node %s in %s (zone %s)\n", rep.PeerID, rep.Data, rep.Zone)
	fmt.Fprintf(w, "  identity  %s (%s)\n", filepath.Join(rep.Data, "identity.key"), map[bool]string{true: "created", false: "kept"}[rep.IdentityCreated])
	fmt.Fprintf(w, "  config    %s\n", rep.Config)
	fmt.Fprintf(w, "  services  %s (%s)\n", rep.Services, map[bool]string{true: "template: edit it", false: "kept"}[rep.ServicesWritten])
	for _, f := range [][2]string{{"swarm key", rep.SwarmKey}, {"members", rep.TrustedPeers}, {"clients", rep.Clients}} {
		if f[1] != "" {
			fmt.Fprintf(w, "  %-9s %s (copied)\n", f[0], f[1])
		}
	}
	fmt.Fprintln(w, "\nfor a neighbour's bedwe init --join (or bootstrap: in its config.yaml):")
	if len(rep.Addrs) == 0 {
		fmt.Fprintln(w, "  (no address found: use this board's IP address and port, ending in /p2p/"+rep.PeerID+")")
	}
	for _, a := range rep.Addrs {
		fmt.Fprintln(w, "  "+a)
	}
	fmt.Fprintf(w, "for a neighbour's --trust (or trusted-keys file), to accept timetables this node signs (%s):\n", rep.Fingerprint)
	fmt.Fprintln(w, "  "+rep.PublicKey)
	fmt.Fprintf(w, "for the mesh's trusted-peers file: %s\n", rep.PeerID)
	fmt.Fprintf(w, "for other boards' clients file (this board's own CLI, %s): %s\n", filepath.Join(rep.Data, "client.key"), rep.ClientID)

	fmt.Fprintf(w, "\nstart it: bedwe node --data %s\n", rep.Data)
}

// neighbourAddrs are the addresses a neighbour dials: the listen addresses
// with unspecified IPs (0.0.0.0, ::) replaced by this machine's interface
// addresses (loopback and link-local left out unless nothing else is
// left), each ending in /p2p/ID. A port 0 listener gets its port at start:
// node.json then has the real addresses.
func neighbourAddrs(listen []ma.Multiaddr, id string) []string {
	var specific, unspec []ma.Multiaddr
	for _, a := range listen {
		if manet.IsIPUnspecified(a) {
			unspec = append(unspec, a)
		} else {
			specific = append(specific, a)
		}
	}
	addrs := specific
	if len(unspec) > 0 {
		if ifaces, err := manet.InterfaceMultiaddrs(); err == nil {
			if resolved, err := manet.ResolveUnspecifiedAddresses(unspec, ifaces); err == nil {
				var good, local []ma.Multiaddr
				for _, a := range resolved {
					if manet.IsIPLoopback(a) || manet.IsIP6LinkLocal(a) {
						local = append(local, a)
					} else {
						good = append(good, a)
					}
				}
				if len(good) == 0 {
					good = local
				}
				addrs = append(addrs, good...)
			}
		}
	}
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, a.String()+"/p2p/"+id)
	}
	return out
}

// initSettings are the values bedwe init writes as active settings.
type initSettings struct {
	data, peerID, zone, services, network string
	listen, bootstrap                     []string
	// members are membership settings (flag name, file in DATA).
	members [][2]string
}

// nodeConfigText renders config.yaml: the settings init knows, then every
// other flag of the node command commented out at its default, with its
// usage, so an operator uncomments what to change. Flags added to bedwe node
// later appear here without a change to init.
func nodeConfigText(s initSettings, flags []cli.Flag) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# bedwe node configuration, written by bedwe init for peer %s.\n", s.peerID)
	fmt.Fprintf(&b, "# bedwe node --data %s reads it. Each key is a flag of bedwe node (see\n", yamlScalar(s.data))
	b.WriteString("# bedwe node --help); a BEDWE_<FLAG> environment variable (BEDWE_ZONE,\n" +
		"# BEDWE_LOG_LEVEL, ...) overrides a value here, and a flag on the command line\n" +
		"# overrides both. Relative paths are relative to the node's working directory.\n\n")
	written := map[string]bool{"data": true}
	b.WriteString("# the load-shedding zone this board is in (as the timetable names it)\n")
	fmt.Fprintf(&b, "zone: %s\n", yamlScalar(s.zone))
	written["zone"] = true
	b.WriteString("# multiaddrs to listen on\nlisten:\n")
	for _, l := range s.listen {
		fmt.Fprintf(&b, "  - %s\n", yamlScalar(l))
	}
	written["listen"] = true
	b.WriteString("# what this board may run (YAML; go doc github.com/bedwe/bedwe/node/service)\n")
	fmt.Fprintf(&b, "services: %s\n", yamlScalar(s.services))
	written["services"] = true
	if len(s.bootstrap) > 0 {
		b.WriteString("# neighbours to join through (full multiaddrs with /p2p/ID)\nbootstrap:\n")
		for _, a := range s.bootstrap {
			fmt.Fprintf(&b, "  - %s\n", yamlScalar(a))
		}
	} else {
		b.WriteString("# neighbours to join through (full multiaddrs with /p2p/ID, as bedwe init\n" +
			"# prints them); without any, mDNS finds peers on the same LAN\n" +
			"# bootstrap:\n#   - /ip4/192.168.1.7/tcp/4001/p2p/12D3KooW...\n")
	}
	written["bootstrap"] = true
	if s.network != "" {
		b.WriteString("# mesh name; peers only see peers of the same network\n")
		fmt.Fprintf(&b, "network: %s\n", yamlScalar(s.network))
		written["network"] = true
	}
	if len(s.members) > 0 {
		b.WriteString("# membership of a private mesh (see the README's Membership section)\n")
		for _, m := range s.members {
			fmt.Fprintf(&b, "%s: %s\n", m[0], yamlScalar(m[1]))
			written[m[0]] = true
		}
	}
	b.WriteString("\n# The other settings, at their defaults: uncomment a line to change it.\n")
	for _, f := range flags {
		name := f.Names()[0]
		if written[name] || kindOf(f) == kindNone {
			continue
		}
		if u, ok := f.(cli.DocGenerationFlag); ok && u.GetUsage() != "" {
			b.WriteString("\n")
			for _, line := range wrapWords(u.GetUsage(), 76) {
				fmt.Fprintf(&b, "# %s\n", line)
			}
		}
		fmt.Fprintf(&b, "# %s: %s\n", name, flagDefaultYAML(f))
	}
	return b.Bytes()
}

// flagDefaultYAML renders f's default as a YAML value.
func flagDefaultYAML(f cli.Flag) string {
	switch f := f.(type) {
	case *cli.StringFlag:
		return yamlScalar(f.Value)
	case *cli.PathFlag:
		return yamlScalar(f.Value)
	case *cli.StringSliceFlag:
		var vals []string
		if f.Value != nil {
			vals = f.Value.Value()
		}
		quoted := make([]string, len(vals))
		for i, v := range vals {
			quoted[i] = yamlScalar(v)
		}
		return "[" + strings.Join(quoted, ", ") + "]"
	case *cli.BoolFlag:
		return fmt.Sprint(f.Value)
	case *cli.DurationFlag:
		return f.Value.String()
	case cli.DocGenerationFlag:
		if v := f.GetValue(); v != "" {
			return v
		}
	}
	return `""`
}

// yamlScalar renders s as a YAML scalar, quoted when it must be.
func yamlScalar(s string) string {
	if s == "" {
		return `""`
	}
	out, err := yaml.Marshal(s)
	if err != nil {
		return fmt.Sprintf("%q", s)
	}
	return strings.TrimSuffix(string(out), "\n")
}

// wrapWords splits s into lines of at most width bytes at spaces.
func wrapWords(s string, width int) []string {
	var lines []string
	var cur string
	for _, w := range strings.Fields(s) {
		if cur != "" && len(cur)+1+len(w) > width {
			lines = append(lines, cur)
			cur = ""
		}
		if cur != "" {
			cur += " "
		}
		cur += w
	}
	if cur != "" {
		lines = append(lines, cur)
	}
	return lines
}

// servicesTemplate is the services file bedwe init writes: one builtin
// service to try the mesh with, and the other kinds commented out.
const servicesTemplate = `# Services this board runs, for bedwe node: a peer runs only what is declared
# here. Full format: go doc github.com/bedwe/bedwe/node/service. Edit, then
# restart the node (systemctl restart bedwe).
version: 1
services:
  # A builtin that answers with what it received: enough to try the mesh
  # (echo hello > hi.bedwe; bedwe submit hi.bedwe --wait).
  hello: {kind: echo}

  # exec: a command reads the JSON request on stdin and writes a JSON object
  # on stdout; a non-zero exit is a failure (its stderr is reported). The
  # command must be an absolute path or found in PATH when the node starts.
  # resize:
  #   kind: exec
  #   command: ["/usr/local/bin/resize", "--fast"]
  #   timeout: 30s    # per attempt; the whole process group is killed
  #   expect: 5s      # expected run time, for power-aware peer choice
  #   max_concurrent: 2  # at most 2 at once on this board (more wait in the queue)

  # http: POST the request as JSON; a 2xx JSON object body is the result.
  # notify: {kind: http, url: "http://127.0.0.1:8080/notify", timeout: 5s}

# Many names at once, by glob, tried in order after the entries above:
# patterns:
#   - {match: "S*", kind: sleep, duration: 50ms}

# Append one JSON line per invocation (an audit of what ran), relative to
# this file:
# record: calls.jsonl
`

// checkServicesTemplate parses the template as bedwe node would.
func checkServicesTemplate() error {
	_, err := service.Parse([]byte(servicesTemplate))
	return err
}
