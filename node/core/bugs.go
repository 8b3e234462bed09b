package core

// Bug switches one protocol mechanism off, in a test build only (tag
// simbugs): the simulator's teeth. Each must make the explorer find a
// violation; one that does not is dead code or a blind spot of the
// checker.
type Bug int

// The switchable mechanisms.
const (
	NoBug Bug = iota
	// BugAnswerBeforeSync answers before the register is durable.
	BugAnswerBeforeSync
	// BugNoBallotFence accepts writes under a ballot below the promised one.
	BugNoBallotFence
	// BugRerouteOnce re-routes a once step instead of failing it.
	BugRerouteOnce
	// BugStartOnTake starts a step on the pack alone, without a majority.
	BugStartOnTake
	// BugRerouteOwnValue re-routes the acceptor's own value, not the
	// highest a majority holds.
	BugRerouteOwnValue
	// BugQuorumOfOne decides with one acceptor instead of a majority.
	BugQuorumOfOne
	// BugOnceUnjournaled starts a once step without journaling it first.
	BugOnceUnjournaled
)

// Bugs lists the switchable mechanisms, for the teeth table.
var Bugs = []Bug{BugAnswerBeforeSync, BugNoBallotFence, BugRerouteOnce, BugStartOnTake, BugRerouteOwnValue, BugQuorumOfOne, BugOnceUnjournaled}

func (b Bug) String() string {
	return [...]string{"none", "answer-before-sync", "no-ballot-fence", "reroute-once", "start-on-take", "reroute-own-value", "quorum-of-one", "once-unjournaled"}[b]
}
