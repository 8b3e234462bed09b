// Package outage is the live availability view of the mesh: it combines the
// load-shedding timetable (package schedule), heartbeat verdicts and
// gossiped presence to answer "can peer P run a step for d from now?", ranks
// the peers that can, learns how long each service takes, and gives a node
// its own drain signal before its zone goes dark.
//
// # What it owns, and what it never touches
//
// It owns the View: the timetable in force, per-peer presence (zone,
// draining, last heard) and suspicion, run-time samples per service, the
// peer-choice order, and the drain decision. It never touches the network,
// packs, workflows, journals or the CLI: it imports neither libp2p nor node,
// and does no I/O. It does not run the failure detector (package heartbeat
// does; the node forwards its Suspicions here), does not verify or store
// timetables (the node verifies a schedule.Signed and hands over the
// result), and does not measure load (the node passes the gossiped figures
// in each Candidate). Time comes from an injected Clock, so every rule is
// tested in virtual time.
//
// # Time
//
// All instants and durations the view sees are on its clock. On the real
// mesh that is the wall clock; on a testnet it is a schedule.VirtualClock
// shared by every node, which runs the timetable faster than real time. The
// node then hands the view virtual instants (Observe(..., vc.Now())) and
// virtual durations (Learn(svc, vc.Virtual(took))), and converts the
// view's answers back with vc.RealAt before setting real timers.
// TestnetConfig scales the process-bound settings accordingly.
//
// # How the node uses it
//
//   - At start: NewView(clock, cfg, schedule) with the persisted timetable,
//     or nil. When a verified timetable arrives on pubsub: Offer(s) (newest
//     issued_at wins); persist it if Offer returns true.
//   - Presence: for every announcement received, and for its own each time
//     it announces, Observe(peerID, zone, draining, now). Forget(peerID)
//     when a peer leaves for good.
//   - Heartbeat: on a heartbeat.Suspicion for key "peerID/workflow/step",
//     Suspect(peerID); on a successful hand-off to a peer, Alive(peerID).
//   - Peer choice: expected := Expected(service, declared expect=); then
//     Rank(candidates, self, expected) over the peers offering the service
//     whose circuit breaker is closed. The node (node/router.go) keeps only
//     the peers Rank returns and weighs their verdicts into its own score
//     (not Known: last; more spare powered time: better) next to what only
//     it knows (FORK siblings on distinct peers, open connections, itself
//     last). Unguarded CHOICE takes the first arm whose head service has a
//     candidate left. CanRun judges single peers (guardians, join replicas
//     before a hand-over).
//   - After a step succeeds: Learn(service, took).
//   - Drain: poll Drain(selfZone) (or set a timer at DrainAt); while it is
//     true, announce draining, refuse new packs, and hand off join records
//     and queued packs to peers Rank chooses (which excludes the draining
//     zone's own peers as they are about to go dark too).
//
// # Policy choices
//
// Unknown is not powered (schedule's rule), but refusing every peer once a
// timetable runs out would stop the mesh, so the default UnknownPolicy is
// PreferKnown: unknown stretches are used only when no peer is known to be
// powered for the step. Without any timetable the view falls back to
// liveness alone. A clock that reads before the timetable's issued_at (a
// board without a real-time clock that booted into 1970) is treated like
// no timetable, and never triggers a drain. Expected times are an upper
// estimate (90th percentile of recent runs), because being wrong means
// losing a step to a cut; Margin covers hand-off time and clock skew on
// top. Rank's order is documented on Rank.
package outage
