package node

import (
	"log/slog"
	"os"
	"syscall"
	"time"

	"github.com/bedwe/bedwe/node/guard"
)

// The faults a node injects into itself, for the reliability tests that
// must hit a point no outside signal can. Each is an environment variable
// set to "SERVICE:MARKER": it fires at SERVICE's step, the first time the
// file MARKER can be created (the node writes its data directory there,
// so the test knows which node it fired on). They exist only in a build
// with the failpoints tag (failpoint_on.go), which the testnet tests make;
// a released binary ignores these variables (failpoint_off.go).
const (
	// FailpointKillAfterRan makes the node SIGKILL itself right after a
	// step of SERVICE ran and its outcome was stepped, before anything is
	// handed on — inside held H4's window, where a quick step's outcome is
	// not journaled yet, so its restart must run it again.
	FailpointKillAfterRan = "BEDWE_FAILPOINT_KILL_AFTER_RAN"
	// FailpointRefuseSettled makes a receiver of SERVICE's hand-over that
	// settled it (the guardians of the step before recorded its release)
	// refuse it as unsettled all the same, as it does when one guardian's
	// answer did not arrive in time although that guardian recorded the
	// release (node/held H7).
	FailpointRefuseSettled = "BEDWE_FAILPOINT_REFUSE_SETTLED"
	// FailpointKillAfterUnsettled makes a sender whose hand-off of SERVICE
	// was refused as unsettled SIGKILL itself before it tries again.
	FailpointKillAfterUnsettled = "BEDWE_FAILPOINT_KILL_AFTER_UNSETTLED"
	// FailpointStallAfterUnsettled makes a sender whose hand-off of
	// SERVICE was refused as unsettled wait failpointUntilKilled before it
	// tries again: the guardians of its step keep their copies pending
	// (node/guard G17) meanwhile, and the test restarts them, then kills
	// the sender.
	FailpointStallAfterUnsettled = "BEDWE_FAILPOINT_STALL_AFTER_UNSETTLED"
	// FailpointKillAfterTaken makes a sender whose hand-off of SERVICE
	// was acknowledged SIGKILL itself before it journals the hand-on: its
	// restarted holder must learn from the guardians and the receiver
	// that the work moved on (node/held H5, H7).
	FailpointKillAfterTaken = "BEDWE_FAILPOINT_KILL_AFTER_TAKEN"
	// FailpointStallAfterProbe makes an origin (or a join) that probed
	// the guardians of a completion (a branch end) whose last step ran
	// SERVICE, none answering superseded, wait failpointStall before it
	// records it and releases them: the window in which node/guard G18
	// holds a re-route off.
	FailpointStallAfterProbe = "BEDWE_FAILPOINT_STALL_AFTER_PROBE"
	// FailpointStallAfterClaim makes a guardian that claimed the re-route
	// of SERVICE's step wait failpointStall before it hands the pack on:
	// another guardian cut off from it claims the same attempt meanwhile,
	// and node/guard G20 must keep one of the two chains.
	FailpointStallAfterClaim = "BEDWE_FAILPOINT_STALL_AFTER_CLAIM"
	// FailpointStallAfterRecord makes a join that recorded a branch end
	// whose last step ran SERVICE wait failpointLongStall before it
	// releases that step's guardians: longer than guard.RecordingHold, so
	// a guardian whose holder went silent meanwhile asks the join whether
	// the branch ended before it re-routes (G18).
	FailpointStallAfterRecord = "BEDWE_FAILPOINT_STALL_AFTER_RECORD"
)

// failpointLongStall is how long FailpointStallAfterRecord waits: twice
// the time a probe holds a re-route off (G18).
const failpointLongStall = 2 * guard.RecordingHold

// failpointUntilKilled is how long FailpointStallAfterUnsettled waits:
// far longer than the test that sets it takes to kill the node.
const failpointUntilKilled = 3 * time.Minute

// failpointStall is how long FailpointStallAfterProbe and
// FailpointStallAfterClaim wait: longer than a silent holder's detection
// and a guardian's checks before its claim.
const failpointStall = 12 * time.Second

// failpoint is one parsed failpoint: its variable, service and marker
// file (service "" when unset).
type failpoint struct{ name, service, marker string }

// stall waits failpointStall if the failpoint fires for service.
func (f failpoint) stall(service, dataDir string, log *slog.Logger) {
	f.stallFor(service, dataDir, log, failpointStall)
}

// stallFor waits d if the failpoint fires for service.
func (f failpoint) stallFor(service, dataDir string, log *slog.Logger, d time.Duration) {
	if !f.fires(service, dataDir) {
		return
	}
	log.Warn("failpoint: stalling", "failpoint", f.name, "service", service, "for", d)
	time.Sleep(d)
}

// kill SIGKILLs this process if the failpoint fires for service.
func (f failpoint) kill(service, dataDir string, log *slog.Logger) {
	if !f.fires(service, dataDir) {
		return
	}
	log.Warn("failpoint: killing this node", "failpoint", f.name, "service", service)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // SIGKILL is not handled: nothing after this runs
}
