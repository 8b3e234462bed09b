package guard

import (
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bedwe/bedwe/internal/script"
	"github.com/bedwe/bedwe/pack"
)

var update = flag.Bool("update", false, "rewrite the expected output of testdata scripts")

// TestScripts replays every testdata/*.txt script (package
// internal/script): each block is one command, a "----" line, and what the
// machine said to do followed by the guard's state. go test -update
// rewrites them after a deliberate rule change.
func TestScripts(t *testing.T) {
	script.RunAll(t, *update, func(t *testing.T) func(string) []string {
		g := New("wf|1")
		return func(cmd string) []string { return apply(t, &g, cmd) }
	})
}

// clock: minute m of the script's day.
func clock(t *testing.T, a map[string]string) time.Time {
	return time.Date(2026, 11, 23, 10, script.Int(t, a, "min", 0), 0, 0, time.UTC)
}

// apply runs one command and renders what the machine said and its state.
func apply(t *testing.T, gp **Guard, cmd string) []string {
	fields := strings.Fields(cmd)
	a := script.Args(fields[1:])
	g := *gp
	var ev Event
	switch fields[0] {
	case "store":
		role := RolePrimary
		if a["role"] == "backup" {
			role = RoleBackup
		}
		ev = Store{Pack: []byte("pack@" + a["attempt"]), Holder: pack.Peer{ID: a["holder"]}, Attempt: script.Int(t, a, "attempt", 0),
			Role: role, Primary: pack.Peer{ID: a["primary"]}, Backups: script.Peers(a["backups"]), Recruit: a["recruit"] == "true", At: clock(t, a)}
	case "release":
		ev = Release{Attempt: script.Int(t, a, "attempt", 0), At: clock(t, a), Probe: a["probe"] == "true", Rerouted: a["rerouted"] == "true", By: a["by"], ByKey: a["by-key"], Yield: a["yield"], Recording: a["recording"] == "true", Rerouter: a["rerouter"]}
	case "moved-on":
		ev = MovedOn{Holder: a["holder"], Attempt: script.Int(t, a, "attempt", 0), At: clock(t, a)}
	case "silent":
		ev = Silent{Holder: a["holder"], Why: "silent"}
	case "handback":
		ev = Handback{From: a["from"], Attempt: script.Int(t, a, "attempt", 0), Why: "cut"}
	case "primary-answer":
		r := Reply{OK: true, Known: a["known"] == "true", Released: a["released"] == "true", Handing: a["handing"] == "true", Recording: a["recording"] == "true", Holder: pack.Peer{ID: a["holder"]}, TookKey: a["took-key"], Attempt: script.Int(t, a, "holder-attempt", 0)}
		ev = PrimaryAnswer{Silent: a["silent"], Attempt: script.Int(t, a, "attempt", 0), Reached: a["reached"] != "false", Reply: r, At: clock(t, a)}
	case "claim":
		ev = Claim{Holder: a["holder"], Attempt: script.Int(t, a, "attempt", 0), At: clock(t, a)}
	case "claim-dispatch":
		ev = ClaimDispatch{Holder: a["holder"], Attempt: script.Int(t, a, "attempt", 0), At: clock(t, a)}
	case "rerouted":
		ev = Rerouted{Target: pack.Peer{ID: a["target"]}, Local: a["local"] == "true", Pack: []byte("pack@" + a["attempt"]),
			Attempt: script.Int(t, a, "attempt", 0), Backups: script.Peers(a["backups"]), At: clock(t, a)}
	case "reroute-refused":
		ev = RerouteRefused{Attempt: script.Int(t, a, "attempt", 0), At: clock(t, a)}
	case "give-up":
		ev = GiveUp{Supersede: a["supersede"] == "true", At: clock(t, a)}
	case "aborted":
		ev = Aborted{}
	case "backup-added":
		ev = BackupAdded{Peer: pack.Peer{ID: a["peer"]}, Attempt: script.Int(t, a, "attempt", 0)}
	case "prune":
		ev = Prune{Before: clock(t, a)}
	case "never-took":
		ev = NeverTook{Holder: a["holder"], Attempt: script.Int(t, a, "attempt", 0), Why: "never took it", At: clock(t, a)}
	case "withdraw":
		ev = Withdraw{Holder: a["holder"], Attempt: script.Int(t, a, "attempt", 0)}
	case "rerouting":
		ev = Rerouting{From: a["from"], Holder: a["holder"], Attempt: script.Int(t, a, "attempt", 0), At: clock(t, a)}
	case "chain-superseded":
		ev = ChainSuperseded{Holder: a["holder"], Attempt: script.Int(t, a, "attempt", 0)}
	case "primary-guards":
		ev = PrimaryGuards{Holder: a["holder"], Attempt: script.Int(t, a, "attempt", 0)}
	case "let-go":
		ev = HolderLetGo{Holder: a["holder"], Attempt: script.Int(t, a, "attempt", 0)}
	case "took":
		said := map[string]Took{"known": TookKnown, "never": TookNever, "unknown": TookUnknown}[a["said"]]
		ev = SuccessorTook{Successor: a["successor"], Holder: a["holder"], Attempt: script.Int(t, a, "attempt", 0), Said: said, Why: "successor never took it", At: clock(t, a)}
	case "newer-attempt":
		ev = NewerAttempt{Attempt: script.Int(t, a, "attempt", 0), At: clock(t, a)}
	case "status":
		return []string{"reply: " + reply(g.Status()), state(g)}
	case "asked-by-backup":
		return []string{"reply: " + reply(g.AskedByBackup(a["holder"], script.Int(t, a, "attempt", 0), clock(t, a))), state(g)}
	case "owner":
		return []string{"reply: " + reply(g.Owner(a["from"], script.Int(t, a, "attempt", 0))), state(g)}
	case "supersedes":
		return []string{fmt.Sprintf("supersedes: %v", g.Supersedes(script.Int(t, a, "attempt", 0))), state(g)}
	case "restart":
		*gp = Restore(g.Key(), g.Copy(), g.Mark(), g.Pending())
		return []string{state(*gp)}
	default:
		t.Fatalf("unknown command %q", fields[0])
	}
	r := g.Step(ev)
	return []string{ready(r), state(g)}
}

func ids(ps []pack.Peer) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.ID)
	}
	return strings.Join(s, ",")
}

func reply(r Reply) string {
	if r.Error != "" {
		return "error"
	}
	var parts []string
	for _, f := range []struct {
		on   bool
		name string
	}{{r.OK, "ok"}, {r.Known, "known"}, {r.Released, "released"}, {r.Superseded, "superseded"}, {r.Pending, "pending"}, {r.Recording, "recording"}, {r.Rerouting, "rerouting"}} {
		if f.on {
			parts = append(parts, f.name)
		}
	}
	if r.Known {
		parts = append(parts, fmt.Sprintf("attempt=%d", r.Attempt))
	}
	if r.Holder.ID != "" {
		parts = append(parts, "holder="+r.Holder.ID)
	}
	if r.TookKey != "" {
		parts = append(parts, "took="+r.TookKey)
	}
	return strings.Join(parts, " ")
}

var persistNames = map[Persist]string{PersistSave: "save", PersistForget: "forget", PersistDropMark: "drop-mark", PersistDelete: "delete", PersistRestore: "restore", PersistForgetPending: "forget-pending", PersistSaveMark: "save-mark"}

func ready(r Ready) string {
	var parts []string
	if r.Persist != PersistNone {
		parts = append(parts, "persist="+persistNames[r.Persist])
	}
	if r.Reply != nil {
		parts = append(parts, "reply=("+reply(*r.Reply)+")")
	}
	if len(r.Watch) > 0 {
		parts = append(parts, "watch="+ids(r.Watch))
	}
	if len(r.Unwatch) > 0 {
		parts = append(parts, "unwatch="+strings.Join(r.Unwatch, ","))
	}
	if r.Claimed {
		parts = append(parts, "claimed")
	}
	if r.Dropped {
		parts = append(parts, "dropped")
	}
	if o := r.Reroute; o != nil {
		hb := ""
		if o.Handback {
			hb = " handback"
		}
		parts = append(parts, fmt.Sprintf("reroute(holder=%s attempt=%d tried=%s%s)", o.Holder.ID, o.Attempt, strings.Join(o.Tried, ","), hb))
	}
	if q := r.AskPrimary; q != nil {
		parts = append(parts, fmt.Sprintf("ask-primary(%s about %s@%d)", q.Primary.ID, q.Silent, q.Attempt))
	}
	if s := r.TellSuperseded; s != nil {
		parts = append(parts, fmt.Sprintf("tell-superseded(%s@%d)", s.Peer.ID, s.Attempt))
	}
	if o := r.ReleaseOld; o != nil {
		parts = append(parts, fmt.Sprintf("release-old(%s@%d)", ids(o.Peers), o.Attempt))
	}
	if r.RecruitBackup {
		parts = append(parts, "recruit-backup")
	}
	if q := r.AskSuccessor; q != nil {
		again := ""
		if q.Again {
			again = " again"
		}
		parts = append(parts, fmt.Sprintf("ask-successor(%s took %s, for %s@%d%s)", q.Successor.ID, q.Key, q.Holder, q.Attempt, again))
	}
	if !r.RecordingUntil.IsZero() {
		parts = append(parts, "recording-until="+r.RecordingUntil.Format("15:04:05"))
	}
	if r.AddWatcher != nil {
		parts = append(parts, fmt.Sprintf("add-watcher=%s@%d", r.AddWatcher.Peer.ID, r.AddWatcher.Attempt))
	}
	if p := r.PendingGone; p != nil {
		parts = append(parts, fmt.Sprintf("pending-gone@%d", p.Attempt))
	}
	return "do: " + strings.Join(parts, " ")
}

func state(g *Guard) string {
	s := "is:"
	if c := g.Copy(); c != nil {
		s += fmt.Sprintf(" copy(%s holder=%s attempt=%d", c.Role, c.Holder.ID, c.Attempt)
		if len(c.Tried) > 0 {
			s += " tried=" + strings.Join(c.Tried, ",")
		}
		if len(c.Backups) > 0 {
			s += " backups=" + ids(c.Backups)
		}
		if c.StoodIn {
			s += " stood-in"
		}
		s += ")"
	}
	if m := g.Mark(); m != nil {
		s += fmt.Sprintf(" released@%d", m.Attempt)
		if m.Rerouted {
			s += "(rerouted)"
		}
		if m.By != "" {
			s += "(by " + m.By
			if m.ByKey != "" {
				s += " took " + m.ByKey
			}
			s += ")"
		}
		if m.Unconfirmed {
			s += "(unconfirmed)"
		}
	}
	if p := g.Pending(); p != nil {
		s += fmt.Sprintf(" pending(%s holder=%s attempt=%d)", p.Role, p.Holder.ID, p.Attempt)
	}
	if g.rerouting {
		s += " rerouting"
	}
	if g.asked.by != "" {
		s += fmt.Sprintf(" asked(by %s at %d until %s)", g.asked.by, g.asked.attempt, g.asked.until.Format("15:04:05"))
	}
	if !g.recording.until.IsZero() {
		s += fmt.Sprintf(" recording(@%d until %s)", g.recording.attempt, g.recording.until.Format("15:04:05"))
	}
	if g.Empty() {
		s += " empty"
	}
	return s
}
