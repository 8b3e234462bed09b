// Package node is one bedwe peer: a libp2p host that gossips its presence,
// accepts message packs from other peers, runs the head service of each pack
// it accepted, and forwards the residual workflow to another live peer. It
// also holds join records for the FORK, FIRST and FAILOVER patterns it split,
// and the result records of workflows submitted to it (it is their origin).
//
// # Reliability invariants
//
// What the node promises while any peers are alive, whatever is SIGKILLed
// when. Each names the code that enforces it and the test that fails when
// it breaks (the chaos scenarios in package testnet count executions from
// the services' invocation record and chains from the nodes' events).
//
//   - I1 — at most one live chain per workflow branch, whatever is killed
//     and across partitions that heal within Config.UnsettledGiveUp
//     (docs/protocol.md, I1). A peer
//     that does not answer a settle is not taken as released: an item none
//     of whose peers answers (on fresh connections) refuses the hand-over
//     as unsettled and the sender keeps the work (settleRounds); a
//     guardian asks the origins and its co-guardians before it re-routes,
//     and does not re-route while it is itself cut off (mayReroute); the
//     backups of a re-routed attempt answer its late release superseded
//     (node/guard G7); and a second receiver of the same attempt (the
//     sender's ack was lost) is refused (G8), as is a second receiver of
//     a join's continuation (join J8); the sender then hands the pack to
//     the first receiver again (handToFirst), which answers as taken
//     whether it still holds the step or already ran and handed it on
//     (handedon.go: a holder remembers for handedOnMemory the attempts it
//     handed on). Two chains of a branch can reach the same step at the
//     same attempt (a guardian re-routed a step before it while its
//     holder, cut off, carried on; or a join copy took over from an actor
//     that was only cut off): a held step and the handed-on memory
//     name the chain (pack.Lineage: the re-routes in its trace, and the
//     join actor that dispatched a branch start or continuation), and a
//     hand-off from another chain is not answered as the one held — an
//     older chain's is refused as superseded, a newer chain's is refused
//     busy while the older is held (the sender tries another peer) and
//     taken once it ended (accept, endedBefore, acceptedBefore;
//     TestChainsOfOneStepToldApart). Before UnsettledGiveUp, a sender takes an unanswering
//     guardian as gone only if it does not answer a ping either
//     (maybeLenient). Responsibility for a
//     step moves to its successor only when the successor has journaled the
//     pack and settled the hand-over itself (settle.go): it releases the
//     guardians of the step before, so the release does not depend on the
//     sender surviving its acknowledgement. The guardians the successor
//     releases are fixed when the holder starts handing on (node/held H3):
//     a guardian offered later is refused, so none is left watching work
//     nobody releases it from. A guardian decides a release
//     and a re-route of the same step atomically (node/guard G1: a release
//     during a claimed re-route, or of an older attempt, is superseded);
//     a release that loses is answered "superseded" and the successor
//     refuses the pack, which stops the superseded chain at its next hop.
//     Branch ends and completions are settled by the join and the origin
//     the same way, splits by the join (join J5): a join or an origin first
//     probes the release (node/guard G6) and refuses, before recording it,
//     a branch end or completion whose last step a guardian re-routed
//     (probeSettle), then records it, then releases. A guardian asks the
//     origin before it re-routes and never re-runs work of a workflow that
//     has ended (workflowEnded), and probes the step before: a copy of a
//     chain a guardian re-routed away from is dropped, not re-routed
//     (chainSuperseded, node/guard G12). The co-guardians it asks answer
//     the holder's releases of that attempt Pending for a while (G13), so
//     a cut-off holder's next hop that reaches only a backup between the
//     primary's question and its re-route notice (G7) cannot start a
//     second chain. A join moves on once (node/join J10): a replica that
//     missed an acknowledged continuation and took the join over is
//     refused at its receiver's settle, and an old actor stops handing on
//     its continuation once it knows a newer one (continuationSuperseded).
//     A backup guardian does not stand in for a primary that is still
//     handing the step on (node/guard G15, handing.go): the sender hands
//     it to its first receiver again, and a re-route meanwhile ran it
//     twice. A re-route is settled at the attempt's other guardians by its
//     first receiver (G20): one that re-routed the attempt too, or whose
//     release of it is confirmed (G21: the step moved on while this
//     guardian was cut off), refuses it, and the re-router drops its
//     copy; a released copy not confirmed yet is journaled as pending
//     (G17), so a restarted guardian still asks about it. Only a word
//     confirms a release: the holder's beats saying it let go of that
//     attempt (a beat that merely does not list it may be older than the
//     release, pending.go), the holder or the successor asked; a copy of
//     a newer attempt stored over a pending one (the re-route's receiver
//     recruiting this guardian) leaves the release unconfirmed.
//     Tests:
//     TestBackupWaitsForAPrimaryHandingTheStep,
//     TestPrimaryAnswersHandingWhileItHandsTheStepOn,
//     TestOldActorStopsHandingOnItsContinuation, node/join/testdata/taken.txt,
//     TestSupersededChainCompletionRefused, TestSupersededChainCopyNotRerouted,
//     TestReleaseWaitsWhileACoGuardianDecidesReroute,
//     TestSameAttemptHandedTwiceRunsOnce, TestUnansweredSettleRefusesHandover,
//     TestSecondSuccessorRefused, TestSecondContinuationReceiverRefused,
//     TestPendingCopyGoesOnlyOnTheHoldersWord,
//     TestAReroutesBackupCopyLeavesAPendingReleaseUnconfirmed,
//     TestHandedOnAttemptNotRunAgain; testnet
//     TestNetnsGuardiansCutFromEachOtherRerouteOnce,
//     TestNetnsAGuardianCutOffDoesNotRerouteAStepThatMovedOn,
//     TestARestartedGuardianStillAsksAboutItsPendingCopy; testnet scenarios sender-after-ack,
//     consecutive, executor, blackout and, on namespaces, isolate-holder,
//     isolate-join-holder, split-zones, flapping-link
//     (executions_duplicated == 0).
//   - I2 — a once=true step executes at most once, ever: a guardian whose
//     holder vanished fails the workflow instead of re-running it
//     (reroute), and by I1 no superseded chain reaches it again. Test:
//     once_violations == 0 in every chaos scenario.
//   - I3 — no workflow stalls after any two peers are killed, or a zone
//     plus one: every hand-off leaves two copies besides the holder's (the
//     sender's and a backup the receiver recruits before it acknowledges,
//     accept; a guardian of the step before is preferred as that backup,
//     keeps the copy in the commit that releases it there,
//     api.GuardStoreRelease, and answers before any other guardian of
//     that step is released, settleRiding; TestRideComesBeforeEveryRelease);
//     joins and origins keep k copies (Config.JoinReplicas,
//     default 2) in distinct zones where possible (pickReplicas), and no
//     step of a branch runs on a peer holding a copy of its join where
//     another peer can run it (withJoinHolders). Two receivers of one
//     attempt that each got one guardian's copy first do not end up named
//     each at the other's copy for ever (node/guard G14: of the two, only
//     the greater peer ID gives way; node/join J11 the same for two
//     receivers of a join's continuation or of a branch start). Tests:
//     TestJoinCopiesPlacement, node/guard/testdata/release.txt (G14),
//     node/join/testdata/swap.txt (J11);
//     scenarios join-and-branch, pair-random, zone-plus-one, flapping-link
//     (completed + refused at-most-once == submitted). A sender whose
//     step's guardians were both killed takes them as gone after
//     unsettledQuick and sends its receivers the pack with those settle
//     items marked Lenient (handoffExcluding encodes it again): the
//     receivers then take it (testnet
//     TestASenderWhoseGuardiansWereKilledHandsOnToAnotherPeer).
//   - I4 — nothing is acknowledged before it is durable: a pack, a join
//     copy, a branch result, a guard release, a workflow record and its
//     completion or cancel reach the journal before the answer; a journal
//     error refuses the request and changes nothing (join copies, guard
//     slots, held work and origin slots step a clone and keep it only once
//     written), so the sender retries. Held work whose later writes (its
//     outcome, "forwarded") the journal keeps refusing goes on in memory,
//     logged as an error: nothing is acknowledged on them, and a restart
//     repeats what the journal missed.
//
// Decisions for joins, guardians, holders and origins live in packages
// node/join, node/guard, node/held and node/origin, state machines with no
// I/O and no lock (Step returns a Ready: persist, replicate or answer,
// then the asynchronous work); join.go, guard.go, holder.go and origin.go
// carry them out, each stepping a clone under a per-record lock and
// keeping it only once persisted (table.go: one map of slots per kind,
// whose lock is never held across I/O). The origin's invariants O1–O5
// (one completion wins; durable before answered; the primary learns a
// completion a replica got; ended stays ended; retention keeps a
// tombstone) serve I1: a guardian that asks an origin whether the
// workflow ended gets a final answer. O6 keeps the result whole when
// holders drop from their packs what nobody ahead reads (stash.go,
// pack.PlanStash): the origin copies store it first and the completion
// takes it back by digest. Every reliability operation is a
// typed request on a protocol ID of its own (node/api guard.go).
//
// Files in this package, one concern each:
//
//	node.go      the Node type, start-up and shut-down
//	host.go      libp2p host, discovery and pubsub wiring; membership
//	             (node/member): swarm key, gater, members-only protocols,
//	             client authorization, rate limits
//	identity.go  the persistent libp2p key and atomic file writes
//	presence.go  gossiped presence and the live view of the mesh; greetings
//	             over open connections, answered with the view
//	router.go    peer choice for the next service
//	capacity.go  the bulkhead (node/bulkhead): limits on concurrent
//	             steps, the busy refusal, submission admission
//	engine.go    accepting packs, running steps, dispatching residuals
//	stash.go     dropping from a pack what nobody ahead reads, once the
//	             origin copies stored it (node/origin O6)
//	holder.go    carrying out the holder machine (node/held): held work
//	             from acceptance to the release of its guardians
//	settle.go    the receiver's side of a hand-over: releases and fencing
//	join.go      carrying out the join machine (node/join)
//	origin.go    carrying out the origin machine (node/origin): workflow
//	             records, their replicas, client requests, progress
//	cancel.go    cancellation broadcast and the local kill switch
//	guard.go     carrying out the guard machine (node/guard): copies of
//	             handed-off packs, suspicion, re-routing
//	beat.go      heartbeats from holders to guardians, recruitment of a
//	             lost guardian, confirming a late holder before accusing it
//	activity.go  DATA/activity.json: what this peer is busy with
//	state.go     what the journal stores and how it is resumed
//	timetable.go the load-shedding timetable, the outage view, trusted keys
//	drain.go     draining before a power cut: hand-over of joins and steps
//	publish.go   signed timetables on pubsub and the late-joiner pull
//	metrics.go   Prometheus metrics and pprof on Config.HTTP
//	dashboard.go the web page on Config.HTTP and its JSON endpoints
//	retention.go forgetting finished history: workflow tombstones, joins,
//	             guard release marks (Config.Retention)
//	table.go     the map of per-record slots the four machines live in
//
// Reliability events (hand-offs, re-routes, suspicions, deliveries, step
// runs) are appended to Config.EventsFile for testnets (package
// node/events) and counted by the metrics (Config.HTTP) through the same
// n.ev.Emit.
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
	"github.com/libp2p/go-libp2p/core/peer"
	"golang.org/x/sync/singleflight"

	"github.com/bedwe/bedwe/breaker"
	"github.com/bedwe/bedwe/heartbeat"
	"github.com/bedwe/bedwe/internal/atomicfile"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/bulkhead"
	"github.com/bedwe/bedwe/node/env"
	"github.com/bedwe/bedwe/node/events"
	"github.com/bedwe/bedwe/node/journal"
	"github.com/bedwe/bedwe/node/member"
	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/node/service"
	"github.com/bedwe/bedwe/pack"
	"github.com/bedwe/bedwe/schedule"
)

// Node is one running peer. Create it with New and run it with Run.
type Node struct {
	// cutOffAt is when this peer last found itself cut off from the mesh
	// (cutOff, unix nanoseconds; 0: never).
	cutOffAt atomic.Int64

	// silentPrimaries remembers since when a stood-in backup's primary
	// guardian has not answered (askPrimary), for mayReroute's
	// co-guardian wait.
	silentPrimaries silenceBook

	cfg Config
	// clock and rand are cfg.Env's: the only clock and random source
	// protocol code reads (see node/env), so a simulator can drive it.
	clock clockwork.Clock
	rand  *env.Rand
	log   *slog.Logger
	host  host.Host
	// selfID is this peer's ID in string form, encoded once when the host
	// starts: packs, records and guard answers name peers by it, and
	// encoding it anew each time costs 1.7 % of a hop's CPU.
	selfID   string
	calls    *rpc.Mux // requests to and from peers (one session per peer)
	ps       *pubsub.PubSub
	pres     *presence
	journal  *journal.Journal
	services *service.Registry
	limits   pack.Limits
	cancels  *pubsub.Topic

	// freshChecks lets concurrent answersFresh calls on one peer share
	// one check (keyed by peer ID).
	freshChecks singleflight.Group
	// dialing counts the dials maybeConnect has in flight.
	dialing atomic.Int64
	// running counts steps executing now (gossiped as queue length).
	running atomic.Int64
	// bulk bounds concurrent executions and the queue of steps waiting
	// for a slot (capacity.go); capacityPoked is when a change of capacity
	// last brought an announcement forward (Unix nanoseconds).
	bulk          *bulkhead.Bulkhead
	capacityPoked atomic.Int64
	capacityLater atomic.Bool // an announcement is due at the window's end
	// submitting counts submissions being recorded (admitWorkflow), under
	// submitMu.
	submitMu   sync.Mutex
	submitting int
	draining   atomic.Bool
	// resumed is set once resume has put every held record read back
	// from the journal in the held table: until then, a question about held
	// work (api.HeldTook) is answered Pending, not "never took".
	resumed     atomic.Bool
	announceNow chan struct{}
	// presenceChanged says something presence announces may have changed
	// (presenceMayChange); presence's announce loop checks it.
	presenceChanged chan struct{}

	watcher      *heartbeat.Watcher
	beatsChanged chan struct{}
	// activityChanged asks for activity.json to be rewritten;
	// activityPasses counts activityLoop's passes (a test reads it).
	activityChanged chan struct{}
	activityPasses  atomic.Uint64

	mu    sync.Mutex
	helds *heldTable // its own lock
	// letGo is the work this peer handed on lately, for its beats to
	// the guardians (node/guard G17, pending.go). Its own lock.
	letGo letGoBook
	// handedOn remembers work run here and handed on (handedon.go).
	handedOn *timedSet[handedOnEntry]
	// unsettled remembers the held keys this peer refused as unsettled
	// and did not take since (for handedOnMemory, not journaled): the
	// sender may end up guarding this peer for that attempt, and a
	// guardian that asks is told it never took it (api.GuardReply.
	// NeverTook, node/guard G10), not that it moved on.
	unsettled *timedSet[struct{}]
	// handing is the steps this peer is handing on now (handing.go): a
	// backup guardian that asks this peer as their primary waits
	// (node/guard G15).
	handing *handingOn
	// The test-only failpoints of failpoint.go (unset: off).
	killAfterRan, refuseSettled, killAfterUnsettled, stallAfterUnsettled, killAfterTaken, stallAfterProbe, stallAfterClaim, stallAfterRecord failpoint
	guards                                                                                                                                   *guardTable // its own lock
	// firstBeat holds holders to watch once their first beat arrives.
	firstBeat map[string]time.Time
	joins     *joinTable // its own lock
	// origins are the workflow records (primary or replica), each with
	// its own lock (origin.go).
	origins *originTable
	// progress keeps the attempts reported to running workflows this
	// node is the origin of, for the dashboard (dashboard.go).
	progress *progressLog
	// outbox gathers progress reports for other origins (progress.go).
	outbox    *progressOutbox
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
	// ev records reliability events (nil: none; see node/events): to
	// Config.EventsFile and to metrics.
	ev *events.Log
	// metrics is the node's Prometheus registry (nil without Config.HTTP);
	// httpAddr is where it is served. Both are set once in Run.
	metrics  *metrics
	httpAddr string

	// gate is the membership policy and connection gater (node/member);
	// handoffRate and submitRate are per-peer rate limits. swarmKey and
	// clientKey are absolute paths for node.json, clientID the peer ID of
	// the node's own CLI. All are set once in startHost.
	gate        *member.Gate
	handoffRate *member.Limiter
	submitRate  *member.Limiter
	swarmKey    string
	clientKey   string
	clientID    peer.ID

	ctx context.Context
	// wg tracks the tasks spawn starts; spawnMu and stopping keep spawn
	// from adding to it once Run waits on it (a WaitGroup must not be
	// added to from zero while it is waited on).
	wg       sync.WaitGroup
	spawnMu  sync.Mutex
	stopping bool
	zone     string
}

// New loads the services file and checks the configuration; Run starts the
// peer.
func New(cfg Config) (*Node, error) {
	cfg.fillDefaults()
	if cfg.DataDir == "" {
		return nil, fmt.Errorf("node: a data directory is required (--data)")
	}
	if cfg.HTTP != "" {
		if err := checkHTTPAddr(cfg.HTTP, cfg.HTTPPublic); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("node: create data directory: %w", err)
	}
	var reg *service.Registry
	if cfg.ServicesFile != "" {
		r, err := service.LoadFile(cfg.ServicesFile, service.WithClock(cfg.Env.Clock))
		if err != nil {
			return nil, fmt.Errorf("node: %w", err)
		}
		reg = r
	} else {
		r, err := service.Parse([]byte("version: 1\n"), service.WithClock(cfg.Env.Clock))
		if err != nil {
			return nil, fmt.Errorf("node: empty services: %w", err)
		}
		reg = r
	}
	n := &Node{
		cfg:                 cfg,
		clock:               cfg.Env.Clock,
		rand:                cfg.Env.Rand,
		log:                 cfg.Logger,
		services:            reg,
		limits:              pack.DefaultLimits(),
		announceNow:         make(chan struct{}, 1),
		presenceChanged:     make(chan struct{}, 1),
		joins:               newJoinTable(),
		helds:               newHeldTable(),
		handedOn:            newTimedSet[handedOnEntry](),
		unsettled:           newTimedSet[struct{}](),
		silentPrimaries:     newSilenceBook(),
		handing:             newHandingOn(cfg.Env.Clock),
		killAfterRan:        failpointFromEnv(FailpointKillAfterRan),
		refuseSettled:       failpointFromEnv(FailpointRefuseSettled),
		killAfterUnsettled:  failpointFromEnv(FailpointKillAfterUnsettled),
		stallAfterUnsettled: failpointFromEnv(FailpointStallAfterUnsettled),
		killAfterTaken:      failpointFromEnv(FailpointKillAfterTaken),
		stallAfterProbe:     failpointFromEnv(FailpointStallAfterProbe),
		stallAfterClaim:     failpointFromEnv(FailpointStallAfterClaim),
		stallAfterRecord:    failpointFromEnv(FailpointStallAfterRecord),
		guards:              newGuardTable(),
		firstBeat:           map[string]time.Time{},
		beatsChanged:        make(chan struct{}, 1),
		activityChanged:     make(chan struct{}, 1),
		active:              map[string]*activeStep{},
		cancelled:           map[string]time.Time{},
		returned:            make(chan struct{}),
		drainKick:           make(chan struct{}, 1),
		breakers:            breaker.New(cfg.Breaker),
		zone:                cfg.Zone,
	}
	n.helds.added = func() {
		n.kickBeats()
		n.touchActivity() // activityLoop waits for it when nothing is held
	}
	n.origins = newOriginTable(n.saveWorkflow, n.deleteWorkflow)
	n.progress = newProgressLog()
	n.outbox = newProgressOutbox()
	if err := n.newBulkhead(); err != nil {
		return nil, err
	}
	return n, nil
}

// Run starts the peer and blocks until ctx is cancelled, then shuts down.
// ready, if non-nil, is called once the peer listens and has written
// node.json.
func (n *Node) Run(ctx context.Context, ready func(api.NodeFile)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n.ctx = ctx

	jopts := []journal.Option{journal.WithClock(n.clock)}
	if n.cfg.HTTP != "" {
		n.metrics = newMetrics()
		jopts = append(jopts, journal.WithObserver(n.metrics.observeJournal))
	}
	jpath := filepath.Join(n.cfg.DataDir, "journal.db")
	switch res, err := journal.CompactIfSparse(jpath); {
	case err != nil:
		// Not fatal: the journal opens as it is (Open reports damage).
		n.log.Warn("journal not compacted", "err", err)
	case res.Compacted:
		n.log.Info("journal compacted", "before_bytes", res.Before, "after_bytes", res.After, "free", fmt.Sprintf("%.0f%%", 100*res.Free))
	}
	j, err := journal.Open(jpath, jopts...)
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
	defer n.calls.Close()

	if n.cfg.EventsFile != "" || n.metrics != nil {
		var observe func(events.Event)
		if n.metrics != nil {
			observe = n.metrics.observe
		}
		ev, err := events.New(n.cfg.EventsFile, n.selfID, observe)
		if err != nil {
			return fmt.Errorf("node: %w", err)
		}
		n.ev = ev
		defer ev.Close()
	}

	hbcfg := n.cfg.Heartbeat
	hbcfg.Logger = n.log
	hbcfg.Confirm = n.confirmAlive
	// An idle node watches nobody: no check timer until it does.
	hbcfg.ParkWhenIdle = true
	w, err := heartbeat.NewWatcher(n.clock, hbcfg, n.onSuspect)
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

	if n.metrics != nil {
		addr, stop, err := n.serveHTTP()
		if err != nil {
			return err
		}
		defer stop()
		n.httpAddr = addr
	}

	nf := n.nodeFile()
	data, _ := json.MarshalIndent(nf, "", "  ")
	if err := atomicfile.Write(filepath.Join(n.cfg.DataDir, "node.json"), data, 0o644); err != nil {
		return fmt.Errorf("node: write node.json: %w", err)
	}
	n.log.Info("node running", "peer", n.selfID, "zone", n.cfg.Zone,
		"addrs", nf.Addrs, "services", len(n.services.Names()), "patterns", n.services.Patterns())
	if ready != nil {
		ready(nf)
	}
	go n.bootstrapLoop(ctx)
	n.spawn(n.memberLoop)
	go n.beatLoop(ctx)
	n.spawn(n.activityLoop)
	go n.pruneLoop(ctx)
	n.spawn(n.drainLoop)

	<-ctx.Done()
	n.log.Info("node stopping")
	n.stopTasks()
	return nil
}

// stopTasks makes spawn start nothing more and waits for the tasks it
// started.
func (n *Node) stopTasks() {
	n.spawnMu.Lock()
	n.stopping = true
	n.spawnMu.Unlock()
	n.wg.Wait()
}

func (n *Node) nodeFile() api.NodeFile {
	var addrs []string
	for _, a := range n.host.Addrs() {
		addrs = append(addrs, a.String()+"/p2p/"+n.selfID)
	}
	pub := ""
	if raw, err := n.host.Peerstore().PubKey(n.host.ID()).Raw(); err == nil {
		pub = schedule.FormatPublicKey(raw)
	}
	return api.NodeFile{
		PublicKey: pub,
		PeerID:    n.selfID,
		Addrs:     addrs,
		Zone:      n.cfg.Zone,
		Network:   n.cfg.Network,
		PID:       os.Getpid(),
		StartedAt: n.clock.Now().UTC(),
		SwarmKey:  n.swarmKey,
		ClientKey: n.clientKey,
		ClientID:  n.clientID.String(),
		Members:   n.members(),
		HTTP:      n.httpAddr,
	}
}

// self describes this peer in packs and frames.
func (n *Node) self() pack.Peer {
	var addrs []string
	for _, a := range n.host.Addrs() {
		addrs = append(addrs, a.String())
	}
	return pack.Peer{ID: n.selfID, Addrs: addrs, Zone: n.cfg.Zone}
}

// spawn runs fn as a tracked background task that stops with the node;
// once the node is stopping it runs nothing (fn would see its context
// done at once). Otherwise a task spawned while Run was waiting for the
// others (a presence greeting at shutdown) would add to the WaitGroup
// being waited on: a race, and a runtime panic ("WaitGroup is reused
// before previous Wait has returned").
func (n *Node) spawn(fn func(ctx context.Context)) {
	n.spawnMu.Lock()
	defer n.spawnMu.Unlock()
	if n.stopping {
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		fn(n.ctx)
	}()
}
