package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/bedwe/bedwe/node"
	"github.com/bedwe/bedwe/outage"
	"github.com/bedwe/bedwe/schedule"
)

func nodeCommand() *cli.Command {
	return withConfigFile(&cli.Command{
		Name:  "node",
		Usage: "run one bedwe peer",
		Description: `Runs a peer: it gossips its presence (zone, services, load), accepts message packs
for the services it declares, runs them, and forwards the rest of each workflow to
another live peer. Workflows submitted to it make it their origin (result sink).

The data directory keeps the peer's identity (so its peer ID survives restarts), the
journal of work it holds (so a power cut loses nothing), node.json (how clients find
it), presence.json (its view of the mesh) and client.key (the key of its own CLI).

Membership: --swarm-key makes the mesh private (a host without the key cannot
connect; TCP only, QUIC cannot be used with a private network); --trusted-peers
admits only the listed peer IDs and --clients the listed client IDs (bedwe id prints
either); the local CLI is always admitted through DATA/client.key.

Metrics: --http 127.0.0.1:PORT serves Prometheus metrics at /metrics (bedwe_* for
hand-offs, step runs, re-routes, suspicions, takeovers, journal writes, queues, peers
and breakers; go_*, process_* and libp2p_rcmgr_* besides) and, with --pprof, Go's
profiler at /debug/pprof/; / is a read-only dashboard of the mesh, the workflows this
node is the origin of and the timetable (JSON under /api/). No page asks who is looking, so --http refuses an
address that is not loopback (127.0.0.1, [::1], localhost) unless --http-public is
given too; port 0 picks a free port, which node.json names ("http").

Capacity (bulkheads): at most --max-concurrent steps run at once (and at most
max_concurrent of a service that declares it); at most --queue accepted steps wait
for a slot beyond those, and a hand-off beyond that is refused as busy before
anything is journaled, so the sender tries another peer; presence announces the free
slots.
Beyond --max-workflows running workflows this node is the origin of, a submission is
refused as busy (bedwe submit exits 3).

Settings: DATA/config.yaml (written by bedwe init) holds any of the flags below by
name (zone: block-7, listen: [...]); a BEDWE_<FLAG> environment variable (BEDWE_ZONE,
BEDWE_LOG_LEVEL, ...) overrides the file, and a flag on the command line overrides both.

Examples:
   bedwe init --data ~/.bedwe --zone block-7 && bedwe node --data ~/.bedwe
   bedwe node --data ~/.bedwe --listen /ip4/0.0.0.0/tcp/4001 --zone block-7 --services services.yaml
   bedwe node --data /tmp/n2 --listen /ip4/127.0.0.1/tcp/0 --zone b \
       --services services.yaml --bootstrap /ip4/127.0.0.1/tcp/4001/p2p/12D3KooW...
   bedwe node --data ~/.bedwe --zone block-7 --services services.yaml \
       --swarm-key ~/.bedwe/swarm.key --trusted-peers ~/.bedwe/trusted-peers --clients ~/.bedwe/clients
   bedwe node --data ~/.bedwe --http 127.0.0.1:9464 --pprof   # then: curl 127.0.0.1:9464/metrics
   bedwe node --data ~/.bedwe --max-concurrent 8 --queue 32 --max-workflows 500`,
		Flags: []cli.Flag{
			dataFlag(),
			&cli.StringSliceFlag{Name: "listen", Usage: "multiaddr to listen on (repeatable): TCP (/ip4/0.0.0.0/tcp/4001) or, without --swarm-key, QUIC (/ip4/0.0.0.0/udp/4001/quic-v1)", Value: cli.NewStringSlice("/ip4/0.0.0.0/tcp/4001")},
			&cli.StringFlag{Name: "zone", Usage: "load-shedding zone this board is in", EnvVars: []string{"BEDWE_ZONE"}},
			&cli.StringFlag{Name: "services", Usage: "services file declaring what this peer may run (YAML)"},
			&cli.StringSliceFlag{Name: "bootstrap", Usage: "full multiaddr of a peer to join through (repeatable)"},
			&cli.StringFlag{Name: "network", Usage: "mesh name; peers only see peers of the same network", Value: "bedwe"},
			&cli.BoolFlag{Name: "mdns", Usage: "discover peers on the local network with mDNS", Value: true},
			&cli.DurationFlag{Name: "announce", Usage: "how soon a change of presence (capacity, draining, timetable, addresses) is announced, at most; an unchanged presence is refreshed far less often", Value: 5 * time.Second},
			&cli.DurationFlag{Name: "no-peer-wait", Usage: "how long to wait for a provider of the next service before failing", Value: 30 * time.Second},
			&cli.StringFlag{Name: "log-level", Usage: "debug, info, warn or error", Value: "info"},
			&cli.StringFlag{Name: "profile", Usage: "timing profile: mesh (real boards: 1 s beats, ~5 s detection) or testnet (loopback: 250 ms beats, ~1.5 s detection)", Value: "mesh"},
			&cli.StringFlag{Name: "schedule", Usage: "load-shedding timetable FILE (bedwe-schedule/1) to start with; a newer one published on the mesh replaces it", TakesFile: true},
			&cli.StringFlag{Name: "trusted-keys", Usage: "FILE of Ed25519 public keys (base64 or hex, one per line) whose signed timetables this node accepts; re-read when it changes", TakesFile: true},
			&cli.StringSliceFlag{Name: "trust", Usage: "Ed25519 public KEY (base64 or hex) whose signed timetables this node accepts (repeatable)"},
			&cli.StringFlag{Name: "clock", Usage: "timetable clock START@EPOCHxSPEED for testnets (e.g. 2026-11-23T06:00:00+02:00@1763870400x360: timetable time START at real unix EPOCH, SPEED times faster); empty: real time"},
			&cli.StringFlag{Name: "events", Usage: "append the node's reliability events (hand-offs, step runs, re-routes, suspicions, deliveries) to FILE as JSON lines, for testnets and investigations; grows without bound", TakesFile: true},
			&cli.IntFlag{Name: "replicas", Usage: "how many other peers keep a copy of each join and workflow record (k), in distinct zones where possible", Value: 2},
			&cli.DurationFlag{Name: "retention", Usage: "how long finished workflows keep their result and trace (and finished joins their records) in the journal; then a workflow shrinks to a tombstone (state only) kept four times as long. At least 1m", Value: 7 * 24 * time.Hour},
			&cli.StringFlag{Name: "routing", Usage: "timetable (choose peers powered for the step and drain before cuts) or heartbeat (ignore the timetable; for comparisons)", Value: "timetable"},
			swarmKeyFlag("the mesh's pre-shared key FILE (bedwe swarm-key): only hosts holding it can connect; TCP only, QUIC cannot be used with a private network"),
			&cli.StringFlag{Name: "trusted-peers", Usage: "FILE of member peer IDs, one per line (# comments); every other peer except listed clients is refused at the transport; re-read when it changes. Without it the mesh is open", EnvVars: []string{"BEDWE_TRUSTED_PEERS"}, TakesFile: true},
			&cli.StringFlag{Name: "clients", Usage: "FILE of client peer IDs (bedwe id --client-key FILE prints one) allowed to submit, cancel and read results besides members and this node's own CLI; re-read when it changes", EnvVars: []string{"BEDWE_CLIENTS"}, TakesFile: true},
			clientKeyFlag("key FILE of this node's own CLI, always authorized (created on first start; default DATA/client.key)"),
			&cli.StringFlag{Name: "http", Usage: "serve Prometheus metrics at http://HOST:PORT/metrics and the dashboard at / (e.g. 127.0.0.1:9464; port 0: any free port, named in node.json); a loopback address unless --http-public. Empty: no listener"},
			&cli.BoolFlag{Name: "http-public", Usage: "allow --http on a non-loopback address: the pages answer anyone who can reach them, so firewall the port"},
			&cli.BoolFlag{Name: "pprof", Usage: "also serve Go's profiler at /debug/pprof/ on the --http listener"},
			&cli.IntFlag{Name: "max-concurrent", Usage: "run at most `N` steps at once (services may set a lower max_concurrent of their own); default 4 per CPU, at least 16", Value: node.DefaultMaxConcurrent()},
			&cli.IntFlag{Name: "queue", Usage: "let at most `N` accepted steps wait for an execution slot beyond the --max-concurrent running; beyond that hand-offs are refused as busy and go to other peers", Value: node.DefaultQueueLength},
			&cli.IntFlag{Name: "max-workflows", Usage: "be the origin of at most `N` running workflows; beyond it submissions are refused as busy", Value: node.DefaultMaxWorkflows},
			&cli.IntFlag{Name: "stash-min", Usage: "once a pack carries `BYTES` of outputs that no step ahead reads (steps declare reads=), or of trace entries nothing in it reads, have the workflow's origin copies keep them and drop them from the pack handed on; 0: never", Value: node.DefaultStashMin},
		},
		Action: runNode,
	})
}

func runNode(c *cli.Context) error {
	if c.Args().Present() {
		return cli.Exit(fmt.Sprintf("node takes no arguments (got %q); see bedwe node --help", c.Args().First()), 1)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.String("log-level"))); err != nil {
		return cli.Exit("--log-level: "+err.Error(), 1)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	warnImplausibleClock(logger, time.Now(), c.String("data"), c.String("schedule"))
	var cfg node.Config
	switch c.String("profile") {
	case "mesh":
		cfg = node.DefaultConfig()
	case "testnet":
		cfg = node.TestnetConfig()
	default:
		return cli.Exit(fmt.Sprintf("--profile %q: use mesh or testnet", c.String("profile")), 1)
	}
	cfg.DataDir = c.String("data")
	cfg.Listen = c.StringSlice("listen")
	cfg.Bootstrap = c.StringSlice("bootstrap")
	cfg.Zone = c.String("zone")
	cfg.ServicesFile = c.String("services")
	cfg.Network = c.String("network")
	if c.IsSet("mdns") || c.String("profile") == "mesh" {
		cfg.MDNS = c.Bool("mdns")
	}
	if c.IsSet("announce") || c.String("profile") == "mesh" {
		cfg.AnnounceInterval = c.Duration("announce")
	}
	cfg.PresenceTTL = max(3*cfg.AnnounceInterval, 5*time.Second)
	cfg.NoPeerWait = c.Duration("no-peer-wait")
	cfg.ScheduleFile = c.String("schedule")
	cfg.TrustedKeysFile = c.String("trusted-keys")
	if cfg.TrustedKeysFile != "" {
		if _, err := node.ReadTrustedKeys(cfg.TrustedKeysFile); err != nil {
			return cli.Exit("--trusted-keys: "+err.Error(), 1)
		}
	}
	for _, k := range c.StringSlice("trust") {
		pub, err := schedule.ParsePublicKey(k)
		if err != nil {
			return cli.Exit("--trust: "+err.Error(), 1)
		}
		cfg.TrustedKeys = append(cfg.TrustedKeys, pub)
	}
	if v := c.String("clock"); v != "" {
		vc, err := schedule.ParseVirtualClock(v)
		if err != nil {
			return cli.Exit("--clock: "+err.Error(), 1)
		}
		cfg.Clock = vc
		if c.String("profile") == "testnet" {
			cfg.Outage = outage.TestnetConfig(vc.Speed)
		}
	}
	routing, err := node.ParseRouting(c.String("routing"))
	if err != nil {
		return cli.Exit("--routing: "+err.Error(), 1)
	}
	cfg.Routing = routing
	cfg.EventsFile = c.String("events")
	if k := c.Int("replicas"); k < 1 || k > 5 {
		return cli.Exit(fmt.Sprintf("--replicas %d: use 1 to 5", k), 1)
	} else {
		cfg.JoinReplicas = k
	}
	if r := c.Duration("retention"); r < time.Minute {
		return cli.Exit(fmt.Sprintf("--retention %s: use at least 1m (e.g. 168h for a week)", r), 1)
	} else {
		cfg.Retention = r
	}
	cfg.SwarmKeyFile = c.String("swarm-key")
	cfg.TrustedPeersFile = c.String("trusted-peers")
	cfg.ClientsFile = c.String("clients")
	cfg.ClientKeyFile = c.String("client-key")
	cfg.HTTP = c.String("http")
	cfg.HTTPPublic = c.Bool("http-public")
	cfg.Pprof = c.Bool("pprof")
	if cfg.Pprof && cfg.HTTP == "" {
		return cli.Exit("--pprof is served on the --http listener: give --http 127.0.0.1:PORT too", 1)
	}
	for _, f := range []struct {
		name string
		min  int
		to   *int
	}{{"max-concurrent", 1, &cfg.MaxConcurrent}, {"queue", 1, &cfg.QueueLength}, {"max-workflows", 1, &cfg.MaxWorkflows}} {
		if v := c.Int(f.name); v < f.min {
			return cli.Exit(fmt.Sprintf("--%s %d: use at least %d", f.name, v, f.min), 1)
		} else {
			*f.to = v
		}
	}
	switch v := c.Int("stash-min"); {
	case v < 0:
		return cli.Exit(fmt.Sprintf("--stash-min %d: use 0 (never) or more", v), 1)
	case v == 0:
		cfg.StashMin = -1
	default:
		cfg.StashMin = v
	}
	cfg.Logger = logger
	n, err := node.New(cfg)
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := n.Run(ctx, nil); err != nil {
		return cli.Exit(err.Error(), 1)
	}
	return nil
}
