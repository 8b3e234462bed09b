// Package node is one bedwe peer: a libp2p host that gossips its presence,
// accepts message packs from other peers, runs the head service of each pack
// it accepted, and forwards the residual workflow to another live peer. It
// also holds join records for the FORK, FIRST and FAILOVER patterns it split,
// and the result records of workflows submitted to it (it is their origin).
//
// Files in this package, one concern each:
//
//	node.go      the Node type, start-up and shut-down
//	host.go      libp2p host, discovery and pubsub wiring
//	identity.go  the persistent libp2p key and atomic file writes
//	presence.go  gossiped presence and the live view of the mesh
//	router.go    peer choice for the next service
//	engine.go    accepting packs, running steps, dispatching residuals
//	join.go      join records for FORK, FIRST and FAILOVER
//	origin.go    workflow records, client requests, progress
//	cancel.go    cancellation broadcast and the local kill switch
//	guard.go     guardians: copies of handed-off packs, re-routing, fencing
//	beat.go      heartbeats from holders to guardians, release, recruitment,
//	             confirming a late holder before accusing it
//	activity.go  DATA/activity.json: what this peer is busy with
//	state.go     what the journal stores and how it is resumed
//	timetable.go the load-shedding timetable, the outage view, trusted keys
//	drain.go     draining before a power cut: hand-over of joins and steps
//	publish.go   signed timetables on pubsub and the late-joiner pull
//
// The node never imports the testnet or the CLI.
package node

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"

	"github.com/bedwe/bedwe/breaker"
	"github.com/bedwe/bedwe/heartbeat"
	"github.com/bedwe/bedwe/internal/atomicfile"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/journal"
	"github.com/bedwe/bedwe/node/service"
	"github.com/bedwe/bedwe/pack"
	"github.com/bedwe/bedwe/schedule"
)

// Node is one running peer. Create it with New and run it with Run.
type Node struct {
	cfg      Config
	log      *slog.Logger
	host     host.Host
	ps       *pubsub.PubSub
	pres     *presence
	journal  *journal.Journal
	services *service.Registry
	limits   pack.Limits
	cancels  *pubsub.Topic

	// running counts steps executing now (gossiped as queue length).
	running     atomic.Int64
	draining    atomic.Bool
	announceNow chan struct{}

	watcher      *heartbeat.Watcher
	beatsChanged chan struct{}
	// activityChanged asks for activity.json to be rewritten.
	activityChanged chan struct{}

	mu       sync.Mutex
	held     map[string]*heldItem
	guards   map[string]*guardEntry
	released map[string]releaseMark
	// firstBeat holds holders to watch once their first beat arrives.
	firstBeat map[string]time.Time
	joins     map[string]*joinRecord
	workflows map[string]*workflowRecord
	active    map[string]*activeStep
	cancelled map[string]time.Time
	// returned is closed and replaced whenever a peer (re)appears, waking
	// dispatchers that wait for a provider.
	returned chan struct{}

	// tt is the load-shedding timetable and the outage view.
	tt *timetable
	// breakers are the per-peer circuit breakers peer choice consults.
	breakers *breaker.Set
	// drainKick asks the drain loop to look at the timetable now.
	drainKick chan struct{}
	// sp gossips, serves and fetches signed timetables (publish.go).
	sp *schedulePub

	ctx  context.Context
	wg   sync.WaitGroup
	zone string
}

// New loads the services file and checks the configuration; Run starts the
// peer.
func New(cfg Config) (*Node, error) {
	cfg.fillDefaults()
	if cfg.DataDir == "" {
		return nil, fmt.Errorf("node: a data directory is required (--data)")
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("node: create data directory: %w", err)
	}
	var reg *service.Registry
	if cfg.ServicesFile != "" {
		r, err := service.LoadFile(cfg.ServicesFile)
		if err != nil {
			return nil, fmt.Errorf("node: %w", err)
		}
		reg = r
	} else {
		r, err := service.Parse([]byte("version: 1\n"))
		if err != nil {
			return nil, fmt.Errorf("node: empty services: %w", err)
		}
		reg = r
	}
	return &Node{
		cfg:             cfg,
		log:             cfg.Logger,
		services:        reg,
		limits:          pack.DefaultLimits(),
		announceNow:     make(chan struct{}, 1),
		joins:           map[string]*joinRecord{},
		held:            map[string]*heldItem{},
		guards:          map[string]*guardEntry{},
		released:        map[string]releaseMark{},
		firstBeat:       map[string]time.Time{},
		beatsChanged:    make(chan struct{}, 1),
		activityChanged: make(chan struct{}, 1),
		workflows:       map[string]*workflowRecord{},
		active:          map[string]*activeStep{},
		cancelled:       map[string]time.Time{},
		returned:        make(chan struct{}),
		drainKick:       make(chan struct{}, 1),
		breakers:        breaker.New(cfg.Breaker),
		zone:            cfg.Zone,
	}, nil
}

// Run starts the peer and blocks until ctx is cancelled, then shuts down.
// ready, if non-nil, is called once the peer listens and has written
// node.json.
func (n *Node) Run(ctx context.Context, ready func(api.NodeFile)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n.ctx = ctx

	j, err := journal.Open(filepath.Join(n.cfg.DataDir, "journal.db"))
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	n.journal = j
	defer j.Close()

	if err := n.startTimetable(); err != nil {
		return err
	}

	if err := n.startHost(ctx); err != nil {
		return err
	}
	defer n.host.Close()

	hbcfg := n.cfg.Heartbeat
	hbcfg.Logger = n.log
	hbcfg.Confirm = n.confirmAlive
	w, err := heartbeat.NewWatcher(clockwork.NewRealClock(), hbcfg, n.onSuspect)
	if err != nil {
		return fmt.Errorf("node: heartbeat: %w", err)
	}
	n.watcher = w
	defer w.Close()

	n.registerProtocols()
	if err := n.startCancelTopic(ctx); err != nil {
		return err
	}
	if err := n.startScheduleTopic(); err != nil {
		return err
	}
	pres, err := newPresence(n, n.ps)
	if err != nil {
		return err
	}
	n.pres = pres
	go pres.run(ctx)

	if err := n.resume(ctx); err != nil {
		return fmt.Errorf("node: resume from journal: %w", err)
	}

	nf := n.nodeFile()
	data, _ := json.MarshalIndent(nf, "", "  ")
	if err := atomicfile.Write(filepath.Join(n.cfg.DataDir, "node.json"), data, 0o644); err != nil {
		return fmt.Errorf("node: write node.json: %w", err)
	}
	n.log.Info("node running", "peer", n.host.ID().String(), "zone", n.cfg.Zone,
		"addrs", nf.Addrs, "services", len(n.services.Names()), "patterns", n.services.Patterns())
	if ready != nil {
		ready(nf)
	}
	go n.bootstrapLoop(ctx)
	go n.beatLoop(ctx)
	n.spawn(n.activityLoop)
	go n.pruneLoop(ctx)
	n.spawn(n.drainLoop)

	<-ctx.Done()
	n.log.Info("node stopping")
	n.wg.Wait()
	return nil
}

func (n *Node) nodeFile() api.NodeFile {
	var addrs []string
	for _, a := range n.host.Addrs() {
		addrs = append(addrs, a.String()+"/p2p/"+n.host.ID().String())
	}
	pub := ""
	if raw, err := n.host.Peerstore().PubKey(n.host.ID()).Raw(); err == nil {
		pub = schedule.FormatPublicKey(raw)
	}
	return api.NodeFile{
		PublicKey: pub,
		PeerID:    n.host.ID().String(),
		Addrs:     addrs,
		Zone:      n.cfg.Zone,
		Network:   n.cfg.Network,
		PID:       os.Getpid(),
		StartedAt: time.Now().UTC(),
	}
}

// self describes this peer in packs and frames.
func (n *Node) self() pack.Peer {
	var addrs []string
	for _, a := range n.host.Addrs() {
		addrs = append(addrs, a.String())
	}
	return pack.Peer{ID: n.host.ID().String(), Addrs: addrs, Zone: n.cfg.Zone}
}

// go runs fn as a tracked background task that stops with the node.
func (n *Node) spawn(fn func(ctx context.Context)) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		fn(n.ctx)
	}()
}

// pruneLoop forgets old tombstones.
func (n *Node) pruneLoop(ctx context.Context) {
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		n.mu.Lock()
		for k, mark := range n.released {
			if time.Since(mark.at) > cancelMemory {
				delete(n.released, k)
			}
		}
		n.mu.Unlock()
	}
}
