package testnet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/bedwe/bedwe/internal/atomicfile"
	"github.com/bedwe/bedwe/node/member"
	"github.com/bedwe/bedwe/schedule"
)

// DefaultServices is the services file every testnet node gets unless told
// otherwise: builtins only, so nothing runs outside the test.
//   - fail*    always fails
//   - flaky*   fails half the time (seeded by the idempotency key)
//   - sleep*   sleeps for the input field sleep_ms (ms, or an object by
//     service name), else 100ms
//   - anything else echoes its request (a no-op with a small output)
//
// Every invocation is recorded in RecordFile next to the services file, so
// chaos runs count executions, not only outputs.
const DefaultServices = `version: 1
record: ` + RecordFile + `
patterns:
  - {match: "fail*", kind: fail, probability: 1}
  - {match: "flaky*", kind: fail, probability: 0.5, seed: 1}
  - {match: "sleep*", kind: sleep, from_request: true, field: sleep_ms, duration: 100ms}
  - {match: "*", kind: echo}
`

// Options configure Up.
type Options struct {
	// Nodes is how many processes to start (>= 1).
	Nodes int
	// Dir holds the manifest, the services file and one data dir per node.
	Dir string
	// Zones is how many load-shedding zones; nodes are assigned round-robin.
	Zones int
	// Binary is the bedwe executable; empty means this process's own.
	Binary string
	// Services is the services file text; empty means DefaultServices.
	Services string
	// Announce is the presence interval (short, so the mesh forms fast).
	Announce time.Duration
	// Progress, when set, receives one line per milestone.
	Progress io.Writer
	// ConnectTimeout bounds the wait for every node to see every other.
	ConnectTimeout time.Duration
	// NodeServices, when set, gives node i its own services file text
	// (nodes for which it returns "" get Services).
	NodeServices func(i int) string
	// NodeCommand, when set, gives node i the command that starts it in
	// place of Binary: an emulator and the binary it runs, for example
	// ["qemu-aarch64-static", "bedwe-linux-arm64"], so that one member of
	// the mesh is a board's build. A nil answer keeps Binary.
	NodeCommand func(i int) []string
	// Profile is the nodes' timing profile: "testnet" (default: 250 ms
	// beats, ~1.5 s detection) or "mesh" (1 s beats, ~5 s detection, far
	// fewer false alarms when many nodes share few cores).
	Profile string
	// NoPeerWait is how long a node waits for a provider of the next
	// service before failing the workflow (0: the node's default).
	NoPeerWait time.Duration
	// Schedule is the path of a bedwe-schedule/1 timetable; Up copies it to
	// DIR/schedule.yaml and starts every node with --schedule. Its zone
	// names must be the testnet's zones: with ZoneNames empty, Up takes
	// them from the timetable.
	Schedule string
	// Clock is the virtual timetable clock every node gets with --clock.
	// A zero Epoch is set a couple of seconds ahead of the start; a zero
	// Start reads the real time at the epoch (the clock then runs Speed
	// times faster from now). The zero Clock (Speed 0 too) is real time:
	// no --clock flag.
	Clock schedule.VirtualClock
	// Routing is passed to every node as --routing: "timetable" (the
	// node's default) or "heartbeat" (ignore the timetable, for
	// comparisons). Empty: the node's default.
	Routing string
	// ZoneNames name the zones (default z0, z1, ...; with a Schedule, the
	// timetable's zones). Nodes are assigned round-robin. When set, Zones
	// is len(ZoneNames).
	ZoneNames []string
	// Open starts the nodes without membership: no swarm key, no
	// trusted-peers list, no client key. By default a testnet is a private
	// mesh (DIR/swarm.key) whose nodes trust exactly each other
	// (DIR/trusted-peers) and authorize the testnet's client key
	// (DIR/client.key).
	Open bool
	// Netns runs every node in a network namespace of its own on a bridge
	// (see Netns), with an address in Subnet (default DefaultSubnet), so
	// that partitions, loss and bandwidth limits act on real links. It
	// needs root.
	Netns  bool
	Subnet string
	// NodeFlags are appended to every node's command line, restarts
	// included (for example --max-concurrent 4 --queue 4: the flood
	// bench's limits).
	NodeFlags []string
}

// clockLead is how far ahead of the first node's start Up puts a virtual
// clock's epoch when the caller left it zero.
const clockLead = 2 * time.Second

func (o *Options) fill() error {
	if o.Nodes < 1 {
		return fmt.Errorf("a testnet needs at least 1 node (got %d)", o.Nodes)
	}
	if o.Dir == "" {
		return errors.New("a testnet needs a directory (--dir)")
	}
	if err := o.fillZones(); err != nil {
		return err
	}
	switch o.Routing {
	case "", "timetable", "heartbeat":
	default:
		return fmt.Errorf("routing %q: use timetable or heartbeat", o.Routing)
	}
	if !o.Clock.IsZero() || o.Clock.Speed != 0 {
		if o.Clock.Epoch.IsZero() {
			o.Clock.Epoch = time.Now().Add(clockLead).Truncate(time.Millisecond)
		}
		if o.Clock.Start.IsZero() {
			o.Clock.Start = o.Clock.Epoch
		}
		if err := o.Clock.Validate(); err != nil {
			return err
		}
	}
	if o.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find the bedwe binary: %w", err)
		}
		o.Binary = exe
	}
	if o.Services == "" {
		o.Services = DefaultServices
	}
	if o.Announce <= 0 {
		o.Announce = time.Second
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 30*time.Second + time.Duration(o.Nodes)*time.Second
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return nil
}

// fillZones settles the zone names: ZoneNames, else the timetable's zones
// (the first Zones of them when Zones is set), else z0, z1, ...; and checks
// that every zone is one the timetable knows.
func (o *Options) fillZones() error {
	var sched *schedule.Schedule
	if o.Schedule != "" {
		s, err := schedule.Load(o.Schedule)
		if err != nil {
			return fmt.Errorf("testnet timetable: %w", err)
		}
		sched = s
	}
	switch {
	case len(o.ZoneNames) > 0:
		o.Zones = len(o.ZoneNames)
	case sched != nil:
		for _, z := range sched.Zones {
			o.ZoneNames = append(o.ZoneNames, z.Name)
		}
		if len(o.ZoneNames) == 0 {
			return fmt.Errorf("testnet timetable %s has no zones", o.Schedule)
		}
		if o.Zones > len(o.ZoneNames) {
			return fmt.Errorf("testnet timetable %s names %d zones (%s), fewer than the %d asked for", o.Schedule, len(o.ZoneNames), strings.Join(o.ZoneNames, ", "), o.Zones)
		}
		if o.Zones > 0 {
			o.ZoneNames = o.ZoneNames[:o.Zones]
		}
		o.Zones = len(o.ZoneNames)
	}
	if o.Zones < 1 {
		o.Zones = 1
	}
	if o.Zones > o.Nodes {
		o.Zones = o.Nodes
	}
	if len(o.ZoneNames) > o.Zones {
		o.ZoneNames = o.ZoneNames[:o.Zones]
	}
	for z := len(o.ZoneNames); z < o.Zones; z++ {
		o.ZoneNames = append(o.ZoneNames, "z"+strconv.Itoa(z))
	}
	seen := map[string]bool{}
	for _, z := range o.ZoneNames {
		if z == "" || seen[z] {
			return fmt.Errorf("zone names must be distinct and not empty (got %q)", o.ZoneNames)
		}
		seen[z] = true
		if sched != nil {
			if _, err := sched.StateAt(z, sched.IssuedAt); err != nil {
				return fmt.Errorf("zone %q is not in the timetable %s: the testnet's zones must be the timetable's", z, o.Schedule)
			}
		}
	}
	return nil
}

// Up starts a testnet of real `bedwe node` processes on 127.0.0.1 and
// returns once every node sees every other node's presence.
func Up(ctx context.Context, opts Options) (*Manifest, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	if old, err := LoadManifest(dir); err == nil {
		for i := range old.Nodes {
			if old.alive(&old.Nodes[i]) {
				return nil, fmt.Errorf("a testnet is already running in %s (node %d, pid %d); stop it with `bedwe testnet down --dir %s`", dir, i, old.Nodes[i].PID, dir)
			}
		}
		// A namespace testnet whose harness crashed: remove what it left.
		if err := old.removeNetns(); err != nil {
			return nil, fmt.Errorf("remove the network namespaces of the last testnet in %s: %w", dir, err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create testnet directory: %w", err)
	}
	services := filepath.Join(dir, "services.yaml")
	servicesText, record := withRecord(opts.Services, dir)
	if err := os.WriteFile(services, []byte(servicesText), 0o644); err != nil {
		return nil, fmt.Errorf("write services file: %w", err)
	}
	var schedPath string
	if opts.Schedule != "" {
		data, err := os.ReadFile(opts.Schedule)
		if err != nil {
			return nil, fmt.Errorf("read testnet timetable: %w", err)
		}
		schedPath = filepath.Join(dir, ScheduleFile)
		if err := os.WriteFile(schedPath, data, 0o644); err != nil {
			return nil, fmt.Errorf("copy testnet timetable: %w", err)
		}
	}
	// Nodes check --trusted-keys at start and re-read it when it changes:
	// it starts empty and lists every node's key once all have started.
	keysPath := filepath.Join(dir, TrustedKeysFile)
	if err := os.WriteFile(keysPath, []byte(trustedKeysHeader), 0o644); err != nil {
		return nil, fmt.Errorf("write trusted keys: %w", err)
	}
	binary, err := filepath.Abs(opts.Binary)
	if err != nil {
		return nil, err
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	m := &Manifest{
		Dir:       dir,
		Network:   "testnet-" + hex.EncodeToString(b[:]),
		Binary:    binary,
		Services:  services,
		Announce:  opts.Announce.String(),
		StartedAt: time.Now().UTC(),
		Schedule:  schedPath,
		Clock:     opts.Clock.String(),
		Routing:   opts.Routing,
		Keys:      keysPath,
		Record:    record,
	}
	if opts.NoPeerWait > 0 {
		m.NoPeerWait = opts.NoPeerWait.String()
	}
	m.NodeFlags = slices.Clone(opts.NodeFlags)
	m.Profile = opts.Profile
	if m.Profile == "" {
		m.Profile = "testnet"
	}
	m.Zones = slices.Clone(opts.ZoneNames)
	for i := range opts.Nodes {
		nd := filepath.Join(dir, "node-"+strconv.Itoa(i))
		node := Node{
			Index:   i,
			Zone:    m.Zones[i%opts.Zones],
			DataDir: nd,
			Listen:  "/ip4/127.0.0.1/tcp/0",
			Log:     filepath.Join(nd, "node.log"),
		}
		if opts.NodeCommand != nil {
			node.Command = slices.Clone(opts.NodeCommand(i))
		}
		if opts.NodeServices != nil {
			if text := opts.NodeServices(i); text != "" {
				node.Services = filepath.Join(dir, "services-"+strconv.Itoa(i)+".yaml")
				text, rec := withRecord(text, dir)
				if rec != record {
					node.Record = rec
				}
				if err := os.WriteFile(node.Services, []byte(text), 0o644); err != nil {
					return nil, fmt.Errorf("write services file of node %d: %w", i, err)
				}
			}
		}
		m.Nodes = append(m.Nodes, node)
	}
	if !opts.Open {
		if err := m.membership(); err != nil {
			return nil, err
		}
	}
	fail := func(err error) (*Manifest, error) {
		_ = m.Save()
		_ = m.Down()
		return nil, err
	}
	if opts.Netns {
		if err := NetnsAvailable(); err != nil {
			return nil, err
		}
		if err := m.planNetns(opts.Subnet); err != nil {
			return nil, err
		}
		// Saved before anything is created: Down finds it after a crash.
		if err := m.Save(); err != nil {
			return nil, err
		}
		if err := m.createNetns(); err != nil {
			return fail(err)
		}
		fmt.Fprintf(opts.Progress, "network namespaces bedwe-%s-* on %s (host link %s %s)\n", m.Netns.ID, m.Netns.Subnet, m.Netns.HostLink, m.Netns.HostAddr)
	}
	// The first node is everyone's bootstrap; the rest start in parallel.
	if err := m.start(ctx, &m.Nodes[0], nil); err != nil {
		return fail(err)
	}
	fixListen(&m.Nodes[0])
	fmt.Fprintf(opts.Progress, "node 0 up (%s)\n", m.Nodes[0].PeerID)
	boot := []string{m.Nodes[0].Addrs[0]}
	var wg sync.WaitGroup
	errs := make([]error, len(m.Nodes))
	sem := make(chan struct{}, 8)
	for i := 1; i < len(m.Nodes); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = m.start(ctx, &m.Nodes[i], boot)
			if errs[i] == nil {
				fixListen(&m.Nodes[i])
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fail(err)
	}
	if err := m.writeTrustedKeys(); err != nil {
		return fail(err)
	}
	fmt.Fprintf(opts.Progress, "%d nodes started; waiting for the mesh to connect\n", len(m.Nodes))
	if err := m.Save(); err != nil {
		return fail(err)
	}
	if err := m.WaitConnected(ctx, opts.ConnectTimeout); err != nil {
		return fail(err)
	}
	fmt.Fprintf(opts.Progress, "mesh connected: %d nodes in %d zones\n", len(m.Nodes), len(m.Zones))
	return m, nil
}

// RecordFile is the invocation record file every testnet services file
// names (relative to the testnet directory, where the services files are)
// unless the caller's services text names its own.
const RecordFile = "invocations.jsonl"

// withRecord returns services text that names an invocation record file,
// and that file's absolute path (relative paths are relative to dir, where
// the services file is written). Text whose top level already has a record
// field is returned unchanged; text that is not a YAML mapping that can take
// one more top-level field is returned unchanged with no path (the node
// reports what is wrong with it).
func withRecord(text, dir string) (string, string) {
	path, ok := topRecord(text)
	if !ok {
		added := strings.TrimRight(text, "\n") + "\nrecord: " + RecordFile + "\n"
		if p, ok := topRecord(added); ok && p == RecordFile {
			text, path = added, p
		}
	}
	if path != "" && !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	return text, path
}

// topRecord returns the top-level record field of a services text, and
// whether it has one.
func topRecord(text string) (string, bool) {
	var top map[string]any
	if err := yaml.Unmarshal([]byte(text), &top); err != nil {
		return "", false
	}
	v, ok := top["record"]
	if !ok {
		return "", false
	}
	s, _ := v.(string)
	return s, true
}

// trustedKeysHeader starts DIR/trusted-keys.
const trustedKeysHeader = "# Ed25519 public keys of this testnet's nodes (from node.json), one per line:\n" +
	"# a timetable any of them signs (bedwe schedule publish) is accepted by all.\n"

// writeTrustedKeys writes every node's public key to the trusted-keys file
// (atomically: nodes re-read it when it changes).
func (m *Manifest) writeTrustedKeys() error {
	if m.Keys == "" {
		return nil
	}
	var b strings.Builder
	b.WriteString(trustedKeysHeader)
	nodesMu.Lock()
	for _, nd := range m.Nodes {
		if nd.PublicKey != "" {
			fmt.Fprintf(&b, "%s  # node %d, %s, zone %s\n", nd.PublicKey, nd.Index, nd.PeerID, nd.Zone)
		}
	}
	nodesMu.Unlock()
	if err := atomicfile.Write(m.Keys, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write trusted keys: %w", err)
	}
	return nil
}

// membership writes the testnet's swarm key, client key and trusted-peers
// list. Node identities are created here, before the nodes start, so the
// list names every node from the first connection on (a node's
// DATA/identity.key is a libp2p private key; the node keeps it).
func (m *Manifest) membership() error {
	m.SwarmKey = filepath.Join(m.Dir, SwarmKeyFile)
	m.TrustedPeers = filepath.Join(m.Dir, TrustedPeersFile)
	m.ClientKey = filepath.Join(m.Dir, ClientKeyFile)
	m.Clients = filepath.Join(m.Dir, ClientsFile)
	if err := os.WriteFile(m.Clients, []byte("# client peer IDs (bedwe id --client-key FILE) the nodes authorize besides client.key\n"), 0o644); err != nil {
		return fmt.Errorf("write clients: %w", err)
	}
	_ = os.Remove(m.SwarmKey) // a fresh key for every testnet
	if err := member.WriteSwarmKey(m.SwarmKey); err != nil {
		return fmt.Errorf("testnet: %w", err)
	}
	if _, err := member.LoadOrCreateKey(m.ClientKey); err != nil {
		return fmt.Errorf("testnet client key: %w", err)
	}
	var b strings.Builder
	b.WriteString("# peer IDs of this testnet's nodes (--trusted-peers): nobody else may connect\n")
	for i := range m.Nodes {
		nd := &m.Nodes[i]
		if err := os.MkdirAll(nd.DataDir, 0o700); err != nil {
			return fmt.Errorf("node %d: %w", i, err)
		}
		key, err := member.LoadOrCreateKey(filepath.Join(nd.DataDir, "identity.key"))
		if err != nil {
			return fmt.Errorf("node %d identity: %w", i, err)
		}
		id, err := member.KeyID(key)
		if err != nil {
			return fmt.Errorf("node %d identity: %w", i, err)
		}
		nd.PeerID = id.String()
		fmt.Fprintf(&b, "%s  # node %d, zone %s\n", id, i, nd.Zone)
	}
	if err := atomicfile.Write(m.TrustedPeers, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write trusted peers: %w", err)
	}
	return nil
}

// fixListen pins a node's listen address to the port it got, so a restart
// comes back where its peers expect it.
func fixListen(nd *Node) {
	if len(nd.Addrs) == 0 {
		return
	}
	a := nd.Addrs[0]
	if i := indexP2P(a); i > 0 {
		nd.Listen = a[:i]
	}
}

func indexP2P(a string) int {
	for i := 0; i+5 <= len(a); i++ {
		if a[i:i+5] == "/p2p/" {
			return i
		}
	}
	return -1
}

// WaitConnected waits until every live node's presence view lists every
// other live node.
func (m *Manifest) WaitConnected(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		missing := m.missingPresence()
		if missing == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("mesh not connected after %s: %s", limit, missing)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (m *Manifest) missingPresence() string {
	live := map[string]bool{}
	for i := range m.Nodes {
		if m.alive(&m.Nodes[i]) {
			live[m.Nodes[i].PeerID] = true
		}
	}
	for i := range m.Nodes {
		nd := &m.Nodes[i]
		if !live[nd.PeerID] {
			continue
		}
		var pj presenceJSON
		if err := readJSON(filepath.Join(nd.DataDir, "presence.json"), &pj); err != nil {
			return fmt.Sprintf("node %d has no presence view yet", i)
		}
		seen := map[string]bool{}
		for _, p := range pj.Peers {
			seen[p.ID] = true
		}
		for id := range live {
			if id != nd.PeerID && !seen[id] {
				return fmt.Sprintf("node %d does not see %s yet", i, id)
			}
		}
	}
	return ""
}

// Down stops every node: SIGTERM, then SIGKILL for those still running after
// a grace period; on a network-namespace testnet it then removes the
// namespaces and the host link.
func (m *Manifest) Down() error {
	err := m.stopNodes()
	return errors.Join(err, m.removeNetns())
}

func (m *Manifest) stopNodes() error {
	for i := range m.Nodes {
		_ = m.Kill(i, syscall.SIGTERM)
	}
	var errs []error
	for i := range m.Nodes {
		nd := &m.Nodes[i]
		if err := m.waitGone(nd, 5*time.Second); err != nil {
			if err := m.Kill(i, syscall.SIGKILL); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Down stops the testnet whose manifest is in dir.
func Down(dir string) error {
	m, err := LoadManifest(dir)
	if err != nil {
		return err
	}
	return m.Down()
}
