// Package outage is the live availability view of the mesh: it combines the
// load-shedding timetable (package schedule), heartbeat verdicts (package
// heartbeat) and gossiped presence to answer "can peer P run for d from now?",
// and gives a node its own drain signal before its zone goes dark.
//
// It knows nothing of libp2p streams, packs or the CLI.
package outage
