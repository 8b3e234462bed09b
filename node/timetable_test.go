package node_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bedwe/bedwe/node"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/client"
	"github.com/bedwe/bedwe/outage"
	"github.com/bedwe/bedwe/schedule"
)

// eastWestTimetable darkens zone east from midnight to 02:00 every day; west
// only from noon to 13:00.
const eastWestTimetable = `format: bedwe-schedule/1
timezone: Africa/Johannesburg
issued_at: "2026-01-01T00:00:00+02:00"
known_until: "2027-12-31T00:00:00+02:00"
zones:
  - name: east
    table:
      kind: daily
      cumulative: false
      rows:
        - {start: "00:00", end: "02:00"}
  - name: west
    table:
      kind: daily
      cumulative: false
      rows:
        - {start: "12:00", end: "13:00"}
`

// ttNode describes one in-process node of a timetable test.
type ttNode struct {
	zone      string
	services  string
	bootstrap []string
	// keysFile lists the keys whose signed timetables the node accepts.
	keysFile string
}

// startTimetableNode runs a real node on loopback with the east/west
// timetable, the timetable clock clock, and a minute of margin and two of
// drain lead time.
func startTimetableNode(t *testing.T, network string, clock schedule.VirtualClock, routing node.Routing, spec ttNode) (api.NodeFile, string) {
	t.Helper()
	cfg := testConfig(t, node.TestnetConfig(), spec.services)
	sched := filepath.Join(filepath.Dir(cfg.DataDir), "schedule.yaml")
	if err := os.WriteFile(sched, []byte(eastWestTimetable), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.Network = network
	cfg.Zone = spec.zone
	cfg.Bootstrap = spec.bootstrap
	cfg.ScheduleFile = sched
	cfg.Routing = routing
	cfg.Clock = clock
	cfg.TrustedKeysFile = spec.keysFile
	oc := outage.TestnetConfig(1)
	oc.Margin, oc.DrainMargin, oc.DefaultExpected = time.Minute, 2*time.Minute, 5*time.Second
	cfg.Outage = oc
	nf, _ := runNode(t, cfg)
	return nf, cfg.DataDir
}

// startEastWest starts west (the entry), east and a second west node, and
// waits until the entry sees both others.
func startEastWest(t *testing.T, start time.Time, routing node.Routing, eastServices, westServices string) (entry api.NodeFile, east api.NodeFile, eastDir string) {
	t.Helper()
	network := "tt-" + strings.ReplaceAll(t.Name(), "/", "-")
	clock := schedule.VirtualClock{Start: start, Epoch: time.Now(), Speed: 1}
	entry, _ = startTimetableNode(t, network, clock, routing, ttNode{zone: "west", services: westServices})
	east, eastDir = startTimetableNode(t, network, clock, routing, ttNode{zone: "east", services: eastServices, bootstrap: entry.Addrs})
	west, _ := startTimetableNode(t, network, clock, routing, ttNode{zone: "west", services: westServices, bootstrap: entry.Addrs})
	// Every node, not only the entry: a step's holder picks the next
	// peer from its own view, and a west node that had not heard of east
	// yet kept a whole sequence in west (a flake once presence got slower).
	for _, nf := range []api.NodeFile{entry, east, west} {
		waitPeers(t, nf, 3)
	}
	return entry, east, eastDir
}

// waitActivity polls the activity file in dir until ok holds and returns
// it; on timeout it fails the test with the file and workflow id's status.
func waitActivity(ctx context.Context, t *testing.T, dir, what string, ok func(node.Activity) bool, cl *client.Client, id string) node.Activity {
	t.Helper()
	for {
		a := readActivity(dir)
		if ok(a) {
			return a
		}
		select {
		case <-ctx.Done():
			st, _ := cl.Status(context.Background(), id)
			t.Fatalf("%s: never happened: activity %+v; workflow %s %s %s %+v", what, a, id, st.State, st.Error, st.Recent)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitPeers waits until the node at nf sees n peers (itself included).
func waitPeers(t testing.TB, nf api.NodeFile, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, nf.Addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for {
		peers, err := cl.Peers(ctx)
		if err == nil && len(peers) >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("node did not see %d peers in time (last: %d, %v)", n, len(peers), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// runWorkflow submits source at addr and waits for its end.
func runWorkflow(t *testing.T, addr, source string) api.Status {
	t.Helper()
	return runWorkflowInput(t, addr, source, json.RawMessage(`{}`))
}

// runWorkflowInput submits source with input at addr and waits for its end.
func runWorkflowInput(t *testing.T, addr, source string, input json.RawMessage) api.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	return submitAndWait(t, ctx, cl, source, input, 100*time.Millisecond)
}

// submitAndWait submits source with input through cl and waits for its
// end, asking every poll.
func submitAndWait(t testing.TB, ctx context.Context, cl *client.Client, source string, input json.RawMessage, poll time.Duration) api.Status {
	t.Helper()
	st, err := cl.Submit(ctx, "wf.bedwe", source, input)
	if err != nil {
		t.Fatal(err)
	}
	final, err := cl.Wait(ctx, st.ID, poll, nil)
	if err != nil {
		t.Fatal(err)
	}
	return final
}

const everythingEcho = "version: 1\npatterns:\n  - {match: \"*\", kind: echo}\n"

// TestTimetableRoutingAvoidsZoneAboutToGoDark: five minutes before east's
// cut, steps declared to take ten minutes never go to east, short steps
// still may, and an unguarded CHOICE whose first arm only east offers takes
// the second arm.
func TestTimetableRoutingAvoidsZoneAboutToGoDark(t *testing.T) {
	start := time.Date(2026, 11, 23, 23, 55, 0, 0, time.FixedZone("SAST", 2*3600))
	westServices := "version: 1\npatterns:\n  - {match: \"l*\", kind: echo}\n  - {match: \"s*\", kind: echo}\n  - {match: \"k2\", kind: echo}\n"
	entry, _, _ := startEastWest(t, start, node.RoutingTimetable, everythingEcho, westServices)

	var b strings.Builder
	for i := range 8 {
		// Distinct names: no service gathers the samples that would let a
		// learned (instant) run time override the declared ten minutes.
		b.WriteString("l" + string(rune('a'+i)) + "[expect=10m] s" + string(rune('a'+i)) + " ")
	}
	b.WriteString("CHOICE(k1[expect=10m], k2) ENDCHOICE")
	st := runWorkflow(t, entry.Addrs[0], b.String())
	if st.State != api.StateSucceeded {
		t.Fatalf("workflow %s: %s", st.State, st.Error)
	}
	zones := map[string]string{}
	for _, e := range st.Trace {
		zones[e.Service] = e.Zone
	}
	eastShort := 0
	for i := range 8 {
		long, short := "l"+string(rune('a'+i)), "s"+string(rune('a'+i))
		if zones[long] != "west" {
			t.Errorf("%s (expect=10m) ran in zone %q, five minutes before east's cut; want west", long, zones[long])
		}
		if zones[short] == "east" {
			eastShort++
		}
	}
	if eastShort == 0 {
		t.Errorf("no short step ran in east (zones %v): east is powered for them and should get work", zones)
	}
	if _, ok := st.Result["k1"]; ok || zones["k2"] == "" {
		t.Errorf("CHOICE took k1 (only east offers it and east goes dark before it would end); result keys %v", resultKeys(st.Result))
	}
}

// TestDrainBeforeCut: a minute before east's cut (inside the two-minute
// drain margin) the east node announces that it drains, refuses packs, and
// no step goes there.
func TestDrainBeforeCut(t *testing.T) {
	start := time.Date(2026, 11, 23, 23, 59, 0, 0, time.FixedZone("SAST", 2*3600))
	entry, east, eastDir := startEastWest(t, start, node.RoutingTimetable, everythingEcho, everythingEcho)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, entry.Addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for {
		peers, err := cl.Peers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		draining := false
		for _, p := range peers {
			if p.ID == east.PeerID && p.Draining {
				draining = true
			}
		}
		if draining {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the east node never announced that it drains")
		case <-time.After(100 * time.Millisecond):
		}
	}
	var act node.Activity
	data, err := os.ReadFile(filepath.Join(eastDir, "activity.json"))
	if err == nil {
		_ = json.Unmarshal(data, &act)
	}
	if !act.Draining {
		t.Errorf("east's activity.json does not say it drains: %s", data)
	}
	st := runWorkflow(t, entry.Addrs[0], "d1 d2 d3 d4 d5 d6 d7 d8")
	if st.State != api.StateSucceeded {
		t.Fatalf("workflow %s: %s", st.State, st.Error)
	}
	for _, e := range st.Trace {
		if e.Zone == "east" {
			t.Errorf("step %s ran on the draining east node", e.Service)
		}
	}

	// A pack handed to the draining node directly is refused as draining.
	h, id := rawHost(t, east)
	ack, err := handoff(t, h, id, packFor(t, "d9"))
	if err != nil {
		t.Fatal(err)
	}
	if ack.OK || ack.Code != api.CodeDraining {
		t.Errorf("hand-off to a draining node: ack %+v, want code %s", ack, api.CodeDraining)
	}
}

func resultKeys(m map[string]json.RawMessage) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// readActivity reads a node's activity.json (zero Activity if unreadable).
func readActivity(dir string) node.Activity {
	var a node.Activity
	if data, err := os.ReadFile(filepath.Join(dir, "activity.json")); err == nil {
		_ = json.Unmarshal(data, &a)
	}
	return a
}

// TestDrainHandsOverJoinsAndSteps: east holds a FORK's join and runs a long
// step (the timetable gives it to east: west goes dark before it would end)
// when a newly published timetable announces an east outage a minute away
// (inside the two-minute drain margin) and moves west's cut. East hands the join to its
// replica in west and the long step back to its guardian, which re-runs it
// in west; both workflows complete without east.
func TestDrainHandsOverJoinsAndSteps(t *testing.T) {
	sast := time.FixedZone("SAST", 2*3600)
	clock := schedule.VirtualClock{Start: time.Date(2026, 11, 23, 10, 0, 0, 0, sast), Epoch: time.Now(), Speed: 1}
	network := "tt-" + t.Name()
	keys := filepath.Join(t.TempDir(), "trusted-keys")
	if err := os.WriteFile(keys, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	eastSvc := "version: 1\nservices:\n  fork0: {kind: echo}\n  long: {kind: sleep, duration: 20s}\n"
	// The branches outlast the hand-over of the join on a loaded machine.
	westSvc := "version: 1\nservices:\n  pre: {kind: echo}\n  after: {kind: echo}\n  post: {kind: echo}\n  long: {kind: sleep, duration: 1s}\npatterns:\n  - {match: \"b*\", kind: sleep, duration: 12s}\n"
	w1, w1Dir := startTimetableNode(t, network, clock, node.RoutingTimetable, ttNode{zone: "west", services: westSvc, keysFile: keys})
	_, eastDir := startTimetableNode(t, network, clock, node.RoutingTimetable, ttNode{zone: "east", services: eastSvc, bootstrap: w1.Addrs, keysFile: keys})
	_, w2Dir := startTimetableNode(t, network, clock, node.RoutingTimetable, ttNode{zone: "west", services: westSvc, bootstrap: w1.Addrs, keysFile: keys})
	if err := os.WriteFile(keys, []byte(w1.PublicKey+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitPeers(t, w1, 3)

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, w1.Addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// West goes dark at noon, two hours away: only east can run a step
	// expected to take three. The long step is started first and the FORK
	// only once east runs it, so the join is sure to be open on east while
	// east holds the long step, however slowly a loaded machine forwards.
	longRun, err := cl.Submit(ctx, "long.bedwe", "pre long[expect=3h] post", json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	waitActivity(ctx, t, eastDir, "east holds the long step", func(a node.Activity) bool {
		return slices.ContainsFunc(a.Held, func(h node.ActivityHeld) bool { return h.Step == "long" })
	}, cl, longRun.ID)
	forked, err := cl.Submit(ctx, "fork.bedwe", "fork0 FORK(b1, b2) SYNC after", json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	before := waitActivity(ctx, t, eastDir, "east holds the join", func(a node.Activity) bool {
		return len(a.Joins) > 0
	}, cl, forked.ID)

	// Publish an east outage starting a minute from now on the shared clock
	// (and move west's cut to 03:00, so west can take the long step).
	now := clock.Now().In(sast)
	cut := now.Add(time.Minute).Truncate(time.Second)
	outageTT := strings.Replace(eastWestTimetable, `issued_at: "2026-01-01T00:00:00+02:00"`,
		`issued_at: "`+now.Add(-time.Minute).Format(time.RFC3339)+`"`, 1)
	outageTT = strings.Replace(outageTT, `{start: "12:00", end: "13:00"}`, `{start: "03:00", end: "04:00"}`, 1) +
		"events:\n  - {zone: east, kind: outage, start: \"" + cut.Format(time.RFC3339) + "\", end: \"" + cut.Add(time.Hour).Format(time.RFC3339) + "\"}\n"
	res, err := cl.PublishSchedule(ctx, "outage.yaml", []byte(outageTT))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Adopted {
		t.Fatalf("publish not adopted: %+v", res)
	}

	// East hands the join over: it no longer acts for it, a west node does.
	joinID := before.Joins[0]
	for {
		e, a, b := readActivity(eastDir), readActivity(w1Dir), readActivity(w2Dir)
		if e.Draining && len(e.Joins) == 0 && (slices.Contains(a.Joins, joinID) || slices.Contains(b.Joins, joinID)) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("join %s not handed over: east %+v, west %v / %v", joinID, e, a.Joins, b.Joins)
		case <-time.After(50 * time.Millisecond):
		}
	}

	for _, id := range []string{forked.ID, longRun.ID} {
		st, err := cl.Wait(ctx, id, 100*time.Millisecond, nil)
		if err != nil {
			t.Fatal(err)
		}
		if st.State != api.StateSucceeded {
			t.Fatalf("workflow %s: %s %s", id, st.State, st.Error)
		}
		if id == forked.ID {
			if _, ok := st.Result["after"]; !ok {
				t.Errorf("the FORK's continuation did not run: result keys %v", resultKeys(st.Result))
			}
			continue
		}
		// The long step: handed back on east, run to the end in west.
		var handedBack, ranWest bool
		for _, e := range st.Trace {
			if e.Service != "long" {
				continue
			}
			if e.Zone == "east" && e.Outcome == "superseded" && strings.Contains(e.Note, "handed the step back") {
				handedBack = true
			}
			if e.Zone == "west" && e.Outcome == "ok" {
				ranWest = true
			}
		}
		if !handedBack || !ranWest {
			t.Errorf("long step: handed back by east %v, ran in west %v; trace %+v", handedBack, ranWest, st.Trace)
		}
	}
}
