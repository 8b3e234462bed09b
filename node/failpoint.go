package node

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"syscall"
)

// FailpointKillAfterRan names the environment variable of the one fault
// the node injects into itself, for the reliability tests that must kill
// a holder at a point no outside signal can hit: "SERVICE:MARKER" makes the
// node SIGKILL itself right after a step of SERVICE ran and its outcome was
// stepped, before anything is handed on — inside held H4's window, where a
// quick step's outcome is not journaled yet (reliability-core "Left undone"
// 12) — the first time MARKER can be created (the node writes its data
// directory there, so the test knows which node to restart). Unset, as
// everywhere but in those tests, it does nothing.
const FailpointKillAfterRan = "BEDWE_FAILPOINT_KILL_AFTER_RAN"

// killAfterRan is the parsed failpoint: the service and the marker file
// ("" when unset).
type killAfterRan struct{ service, marker string }

func killAfterRanFromEnv() killAfterRan {
	v := os.Getenv(FailpointKillAfterRan)
	service, marker, ok := strings.Cut(v, ":")
	if !ok || service == "" || marker == "" {
		return killAfterRan{}
	}
	return killAfterRan{service, marker}
}

// fire kills this process if service is the failpoint's and its marker
// does not exist yet.
func (k killAfterRan) fire(service, dataDir string, log *slog.Logger) {
	if k.service == "" || service != k.service {
		return
	}
	f, err := os.OpenFile(k.marker, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return // fired before (or the marker cannot be made): not again
	}
	fmt.Fprintln(f, dataDir)
	_ = f.Sync()
	_ = f.Close()
	log.Warn("failpoint: killing this node after the step ran", "failpoint", FailpointKillAfterRan, "service", service)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // SIGKILL is not handled: nothing after this runs
}
