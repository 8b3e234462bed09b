// Package coreruntime runs the protocol core (node/core) on real libp2p
// hosts with a durable journal: the simulator proves the protocol; real
// hosts prove it behaves so on libp2p. The machine is the same code the
// simulator drives; only the sim.Host under it differs.
//
// One loop: each peer's Runtime owns one core.Node and calls it from one
// goroutine only. Received messages, timer fires, journal commits and
// local calls (Submit) are posted to that loop over one channel, so the
// machine needs no locks and handles one event at a time, as in the
// simulator. A message a peer sends itself is handed back after the event
// that sent it; nothing the machine calls blocks.
//
// Network: one libp2p stream per peer pair and direction (ProtocolID),
// one varint-length-delimited frame per message. Each peer has a bounded
// outbound queue and its own writer; a full queue, a failed dial or a
// failed write drops the message, and the core's resends recover it.
//
// Journal: Append buffers records; Sync commits them in one bbolt
// transaction (fsynced before it returns) off the loop, one commit at a
// time with later Syncs coalesced, and then posts Synced. Persisting
// before answering is the core's rule, not the runtime's: the core holds
// every answer that depends on a record until Synced covers its LSN. On
// start the journal is replayed into Boot (the newest register of each
// workflow and every once-step start record).
//
// Not done here yet, and the production node's job until the core
// replaces its protocol: membership and presence (the mesh is a fixed
// list of peers given at start), services (a step's run is only recorded;
// its duration is the core's own run timer), private networks and
// connection gating, and journal compaction.
package coreruntime
