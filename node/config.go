package node

import (
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/bedwe/bedwe/breaker"
	"github.com/bedwe/bedwe/heartbeat"
	"github.com/bedwe/bedwe/node/env"
	"github.com/bedwe/bedwe/node/member"
	"github.com/bedwe/bedwe/outage"
	"github.com/bedwe/bedwe/schedule"
)

// Routing says what peer choice and drain know about power.
type Routing string

// The routing modes.
const (
	// RoutingTimetable (the default) consults the load-shedding timetable:
	// steps go only to peers powered for the step's expected time plus a
	// margin, and a node drains before its zone's cut.
	RoutingTimetable Routing = "timetable"
	// RoutingHeartbeat ignores the timetable: peers are chosen on liveness
	// alone and outages are found by heartbeats. It exists to measure what
	// the timetable buys.
	RoutingHeartbeat Routing = "heartbeat"
)

// ParseRouting reads "timetable" or "heartbeat".
func ParseRouting(s string) (Routing, error) {
	switch r := Routing(s); r {
	case RoutingTimetable, RoutingHeartbeat:
		return r, nil
	case "":
		return RoutingTimetable, nil
	}
	return "", fmt.Errorf("routing %q: use timetable or heartbeat", s)
}

// Config configures one peer. Zero values are replaced by the defaults of
// DefaultConfig where noted.
type Config struct {
	// DataDir holds the identity key, the journal, node.json and
	// presence.json. Required.
	DataDir string
	// Listen are the multiaddrs to listen on, e.g. /ip4/0.0.0.0/tcp/4001.
	Listen []string
	// Bootstrap are full multiaddrs (with /p2p/ID) of peers to dial at start.
	Bootstrap []string
	// Zone is the load-shedding zone this peer sits in.
	Zone string
	// ServicesFile declares what this peer may run (see node/service).
	ServicesFile string
	// Network names the mesh; peers only exchange presence with peers of the
	// same network. Testnets use a unique name so they never mix.
	Network string
	// MDNS enables local-network discovery. Off for testnets on loopback.
	MDNS bool
	// AnnounceInterval is how often presence is re-published (jittered
	// ±20 %). Shorter converges faster after joins; longer costs less.
	AnnounceInterval time.Duration
	// PresenceTTL is how long a peer stays in the view without a new
	// announcement (at least: a peer that refreshes slowly announces how
	// long it may stay silent, see PresenceRefresh).
	PresenceTTL time.Duration
	// PresenceRefresh is how often an idle peer re-announces an unchanged
	// presence, at least; changes (capacity, draining, services, timetable,
	// addresses) are announced within AnnounceInterval. The refresh grows
	// by PresenceRefreshPerPeer for every peer in the view, so a mesh sends
	// a bounded number of announcements a second whatever its size and
	// idle cost grows linearly, not with the square of the peers. Each
	// announcement carries its refresh interval and receivers
	// keep the peer for 3 of them. While the view holds a peer of an older
	// version (no refresh in its announcements, so it would expire us after
	// its own PresenceTTL), this peer refreshes every AnnounceInterval.
	PresenceRefresh        time.Duration
	PresenceRefreshPerPeer time.Duration
	// Gossip shapes the pubsub mesh that carries presence, cancels and
	// timetables (see GossipConfig). Zero fields take SmallMeshGossip's.
	Gossip GossipConfig
	// TargetPeers is how many direct connections a peer keeps: when it has
	// fewer, it dials peers it learns of through presence. More connections
	// make gossip reliable and hand-offs quicker; each costs a little memory.
	TargetPeers int
	// StreamTimeout bounds every request/response stream exchange.
	StreamTimeout time.Duration
	// NoPeerWait is how long dispatch waits for some live peer to offer the
	// next service before failing the workflow.
	NoPeerWait time.Duration
	// UnsettledGiveUp is how long a sender keeps trying a hand-over that
	// receivers refuse as unsettled (no guardian of the step it ran
	// answers) before it lets them take unanswering guardians as gone.
	// It must outlast the partitions the mesh expects: a guardian cut off
	// for longer may re-route work that has moved on.
	UnsettledGiveUp time.Duration
	// DefaultStepTimeout applies to steps without a timeout attribute whose
	// service declares none.
	DefaultStepTimeout time.Duration
	// Heartbeat tunes beats from holders to guardians and the failure
	// detector that declares a silent holder (see package heartbeat).
	Heartbeat heartbeat.Config
	// BackupDelay is how long a backup guardian lets the primary guardian
	// act on a silent holder before asking it (and acting itself if the
	// primary is gone too).
	BackupDelay time.Duration
	// FirstBeatTimeout is how long a guardian waits for a new holder's first
	// beat before watching it anyway: long enough to open a stream on a
	// loaded board; it bounds detection of a holder that dies at once.
	FirstBeatTimeout time.Duration
	// GuardianLoss is how long a holder tolerates not reaching any guardian
	// of a pack before recruiting a new one.
	GuardianLoss time.Duration
	// SuspectMemory is how long a suspected peer is passed over when
	// choosing guardians and, with the timetable, where to send work,
	// unless a hand-off to it succeeds or it restarts (outage.View
	// SuspectFor, on the timetable clock).
	SuspectMemory time.Duration
	// RestartGrace is how long a restarted peer waits before suspecting the
	// holders it guards: after a blackout every board needs time to boot.
	RestartGrace time.Duration
	// Retention is how long a finished workflow's record (result, trace)
	// and its finished join records are kept; after it the workflow record
	// shrinks to a tombstone (it ended, and how) kept 4 × Retention more,
	// so a guardian that asks much later still hears that it ended. Longer
	// keeps results readable longer; shorter bounds the journal (see
	// docs/operations.md). Zero: 7 days.
	Retention time.Duration
	// ScheduleFile is a bedwe-schedule/1 timetable to start with (the
	// operator put it there, so it is trusted without a signature). A newer
	// one persisted from pubsub (DATA/schedule.signed.json) wins over it.
	ScheduleFile string
	// TrustedKeys are raw Ed25519 public keys whose signed timetables this
	// node accepts from pubsub (see schedule.Signed).
	TrustedKeys [][]byte
	// TrustedKeysFile lists more trusted keys, one base64 or hex key per
	// line (# comments); it is re-read when it changes, so a testnet can
	// write it after its nodes started.
	TrustedKeysFile string
	// Clock is the timetable clock: the zero value is real time; a testnet
	// gives every node the same virtual clock so a day of load shedding
	// plays in minutes. Only timetable decisions read it.
	Clock schedule.VirtualClock
	// Env is the clock and the random source the node's protocol runs on:
	// every timer, timestamp, sleep and random choice of package node, of
	// its RPC mux and journal, and the services' step timeouts come from
	// it (a simulator gives a fake clock and a seeded source). The zero value is env.Real(): the wall clock and a
	// source seeded from crypto/rand; a part left nil is filled the same
	// way. The timetable clock above maps Env's time, not the wall clock.
	Env env.Env
	// Routing says whether peer choice and drain follow the timetable.
	Routing Routing
	// EventsFile, when set, is where the node appends its reliability
	// events (package node/events): hand-offs, re-routes, suspicions,
	// deliveries, completions. Testnets set it; it grows without bound.
	EventsFile string
	// HTTP, when set, is a HOST:PORT on which the node serves Prometheus
	// metrics (/metrics), the dashboard (/, /api/...; dashboard.go) and,
	// with Pprof, Go's profiler (/debug/pprof/). It must be a loopback
	// address (127.0.0.1, ::1, localhost) unless HTTPPublic: no page asks
	// who is looking. Port 0 picks a free
	// port (node.json says which). Empty: no listener.
	HTTP string
	// HTTPPublic allows HTTP on a non-loopback address, for a mesh whose
	// boards are scraped over the network (firewall it).
	HTTPPublic bool
	// Pprof serves /debug/pprof/ on the HTTP listener. A profile costs CPU
	// while it is taken and shows the node's memory: off by default.
	Pprof bool
	// JoinReplicas is how many peers keep a copy of each join record and
	// of each workflow record besides its holder (k; default 2), in
	// distinct zones where possible and never on a peer running a branch
	// of that join.
	JoinReplicas int
	// Outage tunes the availability view (margins, drain lead time, the
	// policy beyond the timetable's horizon), in timetable time. Zero:
	// outage.DefaultConfig, or outage.TestnetConfig(speed) with the testnet
	// profile.
	Outage outage.Config
	// Breaker tunes the per-peer circuit breakers peer choice consults
	// (consecutive failed hand-offs open a peer's breaker; see package
	// breaker). Zero: breaker.DefaultConfig.
	Breaker breaker.Config
	// SwarmKeyFile is the mesh's pre-shared key (a swarm key file, see
	// `bedwe swarm-key`): the host runs a private libp2p network (pnet) and
	// only hosts holding the same key can connect. TCP only: QUIC cannot be
	// used with a private network. Empty: a public network.
	SwarmKeyFile string
	// TrustedPeersFile lists the mesh's members, one peer ID per line (#
	// comments); a connection gater closes connections from every other
	// peer except authorized clients. It is re-read when it changes. Empty:
	// an open mesh (every peer is a member).
	TrustedPeersFile string
	// ClientsFile lists the peer IDs of clients (besides members and the
	// node's own CLI) allowed to submit, cancel, list and read results; it
	// is re-read when it changes. With neither this nor TrustedPeersFile
	// every client is allowed.
	ClientsFile string
	// ClientKeyFile is the key of the node's own CLI, created on first
	// start, always authorized; empty: DATA/client.key.
	ClientKeyFile string
	// Limits are the per-peer rate limits on hand-offs and submissions.
	// Zero: member.DefaultLimits.
	Limits member.Limits
	// MaxConcurrent bounds the steps this node executes at once (the
	// bulkhead, package node/bulkhead; services may set a lower
	// max_concurrent of their own). Zero: DefaultMaxConcurrent().
	MaxConcurrent int
	// QueueLength is how many accepted steps may wait for an execution
	// slot beyond the MaxConcurrent running: with MaxConcurrent + QueueLength
	// steps running or waiting, a hand-off is refused as busy (the sender
	// tries another peer) before anything is journaled. Zero: 64.
	QueueLength int
	// MaxWorkflows bounds the running workflows this node is the origin
	// of; a submission beyond it is refused as busy, with a message saying
	// so. Zero: 4096.
	MaxWorkflows int
	// StashMin is how many bytes of outputs nobody ahead can name a pack
	// must carry before its holder has the workflow's origin copies keep
	// them and drops them from the pack it hands on (only steps
	// that declare reads= leave outputs nobody ahead can name). Zero:
	// DefaultStashMin; negative: never.
	StashMin int
	// Logger receives structured logs; nil means slog.Default().
	Logger *slog.Logger
}

// DefaultMaxConcurrent is the default limit on concurrent step executions:
// four per CPU the Go runtime may use, at least 16. Steps mostly wait on a
// process, an HTTP endpoint or a timer, so a few per core keep a board busy
// without letting a burst of packs start hundreds of processes at once.
func DefaultMaxConcurrent() int { return max(16, 4*runtime.GOMAXPROCS(0)) }

// Defaults of the queue and of the running workflows per origin.
const (
	DefaultQueueLength = 64
	// DefaultStashMin is the default Config.StashMin: a stash costs a
	// round trip and a journal write at each origin copy, so it is paid
	// once for several hops' outputs.
	DefaultStashMin     = 8 << 10
	DefaultMaxWorkflows = 4096
)

// DefaultConfig returns the configuration for a real board on a mesh.
func DefaultConfig() Config {
	return Config{
		Network:                "bedwe",
		MDNS:                   true,
		AnnounceInterval:       5 * time.Second,
		PresenceTTL:            15 * time.Second,
		PresenceRefresh:        30 * time.Second,
		PresenceRefreshPerPeer: 3 * time.Second,
		Gossip:                 SmallMeshGossip(),
		TargetPeers:            8,
		StreamTimeout:          10 * time.Second,
		NoPeerWait:             30 * time.Second,
		UnsettledGiveUp:        30 * time.Second,
		DefaultStepTimeout:     10 * time.Minute,
		Heartbeat:              heartbeat.DefaultMeshConfig(),
		BackupDelay:            10 * time.Second,
		GuardianLoss:           10 * time.Second,
		FirstBeatTimeout:       10 * time.Second,
		SuspectMemory:          time.Minute,
		RestartGrace:           60 * time.Second,
		Retention:              7 * 24 * time.Hour,
	}
}

// PresenceRefreshFor is how often a peer with this configuration
// re-announces an unchanged presence while its view holds that many other
// peers: PresenceRefresh, or PresenceRefreshPerPeer for each peer when
// that is longer. Idle CPU measured over less than this interval may miss the
// refreshes of the whole mesh, or catch them all at once.
func (c Config) PresenceRefreshFor(peers int) time.Duration {
	return max(c.PresenceRefresh, time.Duration(peers)*c.PresenceRefreshPerPeer)
}

// TestnetConfig is DefaultConfig tuned for a loopback testnet: fast beats
// (a killed peer is detected in about 1.5 s) and short waits.
func TestnetConfig() Config {
	c := DefaultConfig()
	c.MDNS = false
	c.AnnounceInterval = time.Second
	c.PresenceRefresh = 10 * time.Second
	c.PresenceRefreshPerPeer = 1500 * time.Millisecond
	c.Heartbeat = heartbeat.DefaultTestnetConfig()
	c.BackupDelay = 3 * time.Second
	c.GuardianLoss = 3 * time.Second
	c.FirstBeatTimeout = 3 * time.Second
	c.SuspectMemory = 10 * time.Second
	c.RestartGrace = 8 * time.Second
	c.Outage = outage.TestnetConfig(1)
	c.Breaker = breaker.Config{Failures: 3, OpenFor: 2 * time.Second, MaxOpenFor: 30 * time.Second}
	return c
}

func (c *Config) fillDefaults() {
	d := DefaultConfig()
	if c.Network == "" {
		c.Network = d.Network
	}
	if c.AnnounceInterval <= 0 {
		c.AnnounceInterval = d.AnnounceInterval
	}
	if c.PresenceTTL <= 0 {
		c.PresenceTTL = max(3*c.AnnounceInterval, 5*time.Second)
	}
	if c.PresenceRefresh <= 0 {
		c.PresenceRefresh = d.PresenceRefresh
	}
	c.PresenceRefresh = max(c.PresenceRefresh, c.AnnounceInterval)
	if c.PresenceRefreshPerPeer < 0 {
		c.PresenceRefreshPerPeer = 0
	}
	c.Gossip = c.Gossip.withDefaults(d.Gossip)
	if c.TargetPeers <= 0 {
		c.TargetPeers = d.TargetPeers
	}
	if c.StreamTimeout <= 0 {
		c.StreamTimeout = d.StreamTimeout
	}
	if c.UnsettledGiveUp <= 0 {
		c.UnsettledGiveUp = d.UnsettledGiveUp
	}
	if c.NoPeerWait <= 0 {
		c.NoPeerWait = d.NoPeerWait
	}
	if c.Retention <= 0 {
		c.Retention = d.Retention
	}
	if c.JoinReplicas <= 0 {
		c.JoinReplicas = 2
	}
	if c.DefaultStepTimeout <= 0 {
		c.DefaultStepTimeout = d.DefaultStepTimeout
	}
	c.Env = c.Env.OrReal()
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.StashMin == 0 {
		c.StashMin = DefaultStashMin
	}
	if c.MaxConcurrent <= 0 {
		c.MaxConcurrent = DefaultMaxConcurrent()
	}
	if c.QueueLength <= 0 {
		c.QueueLength = DefaultQueueLength
	}
	if c.MaxWorkflows <= 0 {
		c.MaxWorkflows = DefaultMaxWorkflows
	}
	if c.Heartbeat.Interval <= 0 {
		c.Heartbeat = d.Heartbeat
	}
	if c.BackupDelay <= 0 {
		c.BackupDelay = d.BackupDelay
	}
	if c.FirstBeatTimeout <= 0 {
		c.FirstBeatTimeout = d.FirstBeatTimeout
	}
	if c.GuardianLoss <= 0 {
		c.GuardianLoss = d.GuardianLoss
	}
	if c.RestartGrace <= 0 {
		c.RestartGrace = d.RestartGrace
	}
	if c.SuspectMemory <= 0 {
		c.SuspectMemory = d.SuspectMemory
	}
	if c.Routing == "" {
		c.Routing = RoutingTimetable
	}
	if c.Outage.PresenceTTL <= 0 {
		c.Outage = outage.DefaultConfig()
	}
	if c.Limits == (member.Limits{}) {
		c.Limits = member.DefaultLimits()
	}
}
