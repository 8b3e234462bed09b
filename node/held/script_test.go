package held

import (
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/bedwe/bedwe/grammar"
	"github.com/bedwe/bedwe/internal/script"
	"github.com/bedwe/bedwe/pack"
)

var update = flag.Bool("update", false, "rewrite the expected output of testdata scripts")

// TestScripts replays every testdata/*.txt script (package
// internal/script): each block is one command, a "----" line, and what the
// machine said to do followed by the holder's state. go test -update
// rewrites them after a deliberate rule change.
func TestScripts(t *testing.T) {
	script.RunAll(t, *update, func(t *testing.T) func(string) []string {
		var m machine
		return func(cmd string) []string { return apply(t, &m, cmd) }
	})
}

// machine is the holder a script drives and what its journal holds: the
// record as last persisted (nil once dropped), which "restore" reads back
// as a restarted node would.
type machine struct {
	h     *Holder
	saved *Record
}

// record is a held pack of the two-step workflow "a b" (with once=true,
// "a[once=true] b") at attempt; its sender is the first guardian.
func record(t *testing.T, a map[string]string) Record {
	src := "a b"
	if a["once"] == "true" {
		src = "a[once=true] b"
	}
	w, err := grammar.Parse("t", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	grammar.AssignPaths(w)
	p := &pack.Pack{WorkflowID: "wf", Workflow: w, Attempt: script.Int(t, a, "attempt", 0), Sender: pack.Peer{ID: a["sender"]}}
	rec := Record{Pack: p, Key: "wf|0|0", GuardKey: "wf|0", Guardians: script.Peers(a["guardians"]), DispatchOnly: a["dispatch-only"] == "true"}
	if a["sender"] != "" && a["sender"] != "self" {
		rec.Guardians = append(script.Peers(a["sender"]), rec.Guardians...)
	}
	return rec
}

// apply runs one command and renders what the machine said and its state.
func apply(t *testing.T, m *machine, cmd string) []string {
	fields := strings.Fields(cmd)
	a := script.Args(fields[1:])
	var ev Event
	switch fields[0] {
	case "accept":
		m.h, m.saved = Accept("self", record(t, a)), nil
		ev = Accepted{}
	case "restore":
		// A restart reads back what was journaled, not what was in memory.
		if m.saved == nil {
			t.Fatalf("restore: nothing journaled")
		}
		m.h = Restore("self", *m.saved)
		return []string{state(m.h)}
	case "backups":
		ev = BackupsRecruited{Peers: script.Peers(a["peers"]), Refused: script.Peers(a["refused"])}
	case "settled":
		res := map[string]SettleResult{"ok": SettleOK, "superseded": SettleSuperseded, "interrupted": SettleInterrupted, "unsettled": SettleUnsettled}[a["result"]]
		ev = Settled{Result: res, Err: "context canceled"}
	case "restored":
		ev = Restored{}
	case "owners":
		ev = Owners{Superseded: a["superseded"] == "true", Released: a["released"] == "true", Ended: a["ended"] == "true",
			Answered: a["answered"] == "true", GiveUp: a["give-up"] == "true", Successor: successorSaid(t, a["successor"])}
	case "ran":
		ev = Ran{OK: a["ok"] != "false", Output: []byte(`{"x":1}`), Error: a["error"], Took: script.Duration(t, a, "took")}
	case "stopped":
		ev = Stopped{Cancelled: a["cancelled"] == "true"}
	case "start-forwarding":
		ev = StartForwarding{}
	case "forwarded":
		ev = Forwarded{Released: script.List(a["released"])}
	case "released":
		ev = Released{}
	case "superseded":
		ev = Superseded{Attempt: script.Int(t, a, "attempt", 0)}
	case "offer":
		ev = OfferWatcher{Peer: pack.Peer{ID: a["peer"]}, Attempt: script.Int(t, a, "attempt", 0)}
	case "guardians-lost":
		ev = GuardiansLost{}
	default:
		t.Fatalf("unknown command %q", fields[0])
	}
	r := m.h.Step(ev)
	switch r.Persist {
	case PersistSave:
		saved := m.h.rec.clone()
		m.saved = &saved
	case PersistDrop:
		m.saved = nil
	}
	return []string{ready(r), state(m.h)}
}

func ids(ps []pack.Peer) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.ID)
	}
	return strings.Join(s, ",")
}

var persistNames = map[Persist]string{PersistSave: "save", PersistDrop: "drop"}

func ready(r Ready) string {
	var parts []string
	if r.Persist != PersistNone {
		parts = append(parts, "persist="+persistNames[r.Persist])
	}
	if p := r.Reply; p != nil {
		s := "reply=("
		switch {
		case p.OK && p.Released:
			s += "ok released"
		case p.OK:
			s += "ok"
			if len(p.Guardians) > 0 {
				s += " backups=" + ids(p.Guardians)
			}
		default:
			s += "refused " + p.Code
		}
		parts = append(parts, s+")")
	}
	if r.Stop {
		parts = append(parts, "stop")
	}
	if r.Run {
		parts = append(parts, "run")
	}
	if f := r.Forward; f != nil {
		s := fmt.Sprintf("forward(steps=%d", len(f.Pack.Workflow.Steps))
		if f.Failed {
			s += " failed"
		}
		for _, it := range f.Pack.Settle {
			s += fmt.Sprintf(" settle=release(%s@%d by %s)", it.Key, it.Attempt, ids(it.Peers))
		}
		parts = append(parts, s+")")
	}
	if len(r.Withdraw) > 0 {
		parts = append(parts, fmt.Sprintf("withdraw=%s@%d", ids(r.Withdraw), r.Attempt))
	}
	if len(r.Release) > 0 {
		parts = append(parts, fmt.Sprintf("release=%s@%d", ids(r.Release), r.Attempt))
	}
	if r.Recruit {
		parts = append(parts, "recruit(not "+ids(r.Exclude)+")")
	}
	if q := r.Ask; q != nil {
		s := fmt.Sprintf("ask(%s@%d", ids(q.Guardians), q.Attempt)
		if q.Origin {
			s += " origin"
		}
		parts = append(parts, s+")")
	}
	if r.BeatsChanged {
		parts = append(parts, "beats")
	}
	for _, n := range r.Notes {
		s := "note=" + n.Kind
		if n.Reason != "" {
			s += "(" + n.Reason + ")"
		}
		parts = append(parts, s)
	}
	if r.Ended {
		parts = append(parts, "ended")
	}
	return strings.TrimRight("do: "+strings.Join(parts, " "), " ")
}

func state(h *Holder) string {
	s := "is: " + h.Phase().String()
	if g := h.Guardians(); len(g) > 0 {
		s += " guardians=" + ids(g)
	}
	rec := h.Record()
	if rec.Executed {
		s += fmt.Sprintf(" executed(ok=%t)", rec.OK)
	}
	if rec.Forwarded {
		s += " forwarded"
	}
	if h.Beats() {
		s += " beats"
	}
	return s
}

// successorSaid parses an owners command's successor= (empty: unnamed).
func successorSaid(t *testing.T, v string) SuccessorSaid {
	for _, s := range []SuccessorSaid{SuccessorUnnamed, SuccessorTook, SuccessorNeverTook, SuccessorUnknown} {
		if v == s.String() || (v == "" && s == SuccessorUnnamed) {
			return s
		}
	}
	t.Fatalf("unknown successor answer %q", v)
	return SuccessorUnnamed
}
