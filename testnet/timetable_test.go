package testnet_test

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/bedwe/bedwe/internal/tier"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bedwe/bedwe/schedule"
	"github.com/bedwe/bedwe/testnet"
)

// lagTolerance is how late a kill or restart may be on a loaded 2-core
// machine (the follower sleeps on timers; the rest is process start-up).
const lagTolerance = 1500 * time.Millisecond

// TestFollowTimetable starts 4 nodes in the rotation's two zones with a
// fast virtual clock and checks that Follow SIGKILLs every process of a
// zone at its cut and restarts them at its restore, on time, and that the
// processes really are gone and back.
func TestFollowTimetable(t *testing.T) {
	tier.Faults(t)
	text, sched, err := testnet.Rotation(testnet.RotationOptions{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "rotation.yaml")
	if err := os.WriteFile(path, text, 0o644); err != nil {
		t.Fatal(err)
	}
	// 1800x: a timetable hour is 2 s, a 2 h cut 4 s, the rotation 12 s.
	// The clock reads 01:30, half an hour before north's restore, about
	// when the mesh is up.
	loc, _ := time.LoadLocation(sched.TimeZone)
	m := up(t, testnet.Options{
		Nodes: 4, Schedule: path, Routing: "heartbeat",
		Clock: schedule.VirtualClock{Start: time.Date(2026, 3, 2, 1, 30, 0, 0, loc), Speed: 1800},
	})
	if strings.Join(m.Zones, ",") != "north,south" {
		t.Fatalf("zones %v, want the timetable's north,south", m.Zones)
	}
	clock, err := m.VirtualClock()
	if err != nil || clock.Speed != 1800 {
		t.Fatalf("manifest clock %q: %v", m.Clock, err)
	}
	// Every node got the timetable, the clock, the routing and the keys.
	keys, err := os.ReadFile(m.Keys)
	if err != nil {
		t.Fatal(err)
	}
	for _, nd := range m.Nodes {
		if nd.PublicKey == "" || !strings.Contains(string(keys), nd.PublicKey) {
			t.Errorf("node %d: public key %q missing from %s", nd.Index, nd.PublicKey, m.Keys)
		}
		cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(nd.PID) + "/cmdline")
		args := strings.ReplaceAll(string(cmdline), "\x00", " ")
		for _, want := range []string{"--schedule " + m.Schedule, "--clock " + m.Clock, "--routing heartbeat", "--trusted-keys " + m.Keys} {
			if !strings.Contains(args, want) {
				t.Errorf("node %d started without %q: %s", nd.Index, want, args)
			}
		}
	}
	zoneOf := map[int]string{}
	for _, nd := range m.Nodes {
		zoneOf[nd.Index] = nd.Zone
	}

	var checks []string
	onEvent := func(ev testnet.TimetableEvent) {
		for k, i := range ev.Nodes {
			if zoneOf[i] != ev.Zone {
				checks = append(checks, "node "+strconv.Itoa(i)+" is not in zone "+ev.Zone)
			}
			pid := ev.PIDs[k]
			switch ev.Kind {
			case testnet.EventKill:
				if !gone(pid, 2*time.Second) {
					checks = append(checks, "killed pid "+strconv.Itoa(pid)+" still runs")
				}
			case testnet.EventRestart:
				var nj struct {
					PID int `json:"pid"`
				}
				data, _ := os.ReadFile(filepath.Join(m.Nodes[i].DataDir, "node.json"))
				_ = json.Unmarshal(data, &nj)
				if !processRuns(pid) || nj.PID != pid {
					checks = append(checks, "restarted node "+strconv.Itoa(i)+" (pid "+strconv.Itoa(pid)+") is not running or did not write node.json")
				}
			}
		}
	}
	// 15 s real = 7.5 timetable hours: north restores, south is cut and
	// restored, north is cut again, whatever the start-up took.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	rep, err := m.Follow(ctx, testnet.FollowOptions{Clock: clock, OnEvent: onEvent, Restore: true, Progress: testWriter{t}})
	if err != nil {
		t.Fatalf("follow: %v", err)
	}
	for _, c := range checks {
		t.Error(c)
	}
	if rep.Errors > 0 {
		t.Errorf("%d kills or restarts failed: %+v", rep.Errors, rep.Events)
	}
	// Every transition strictly inside the run happened, on time, once.
	type key struct {
		zone, kind string
		at         time.Time
	}
	seen := map[key]testnet.TimetableEvent{}
	for _, ev := range rep.Events {
		seen[key{ev.Zone, ev.Kind, ev.Scheduled.UTC()}] = ev
	}
	lo, hi := rep.VirtualFrom.Add(clock.Virtual(100*time.Millisecond)), rep.VirtualTo.Add(-clock.Virtual(lagTolerance))
	want := 0
	for _, z := range m.Zones {
		for _, w := range sched.Windows(z, rep.VirtualFrom.Add(-24*time.Hour), rep.VirtualTo.Add(24*time.Hour)) {
			for kind, at := range map[string]time.Time{testnet.EventKill: w.Start, testnet.EventRestart: w.End} {
				if at.Before(lo) || at.After(hi) {
					continue
				}
				want++
				ev, ok := seen[key{z, kind, at.UTC()}]
				switch {
				case !ok:
					t.Errorf("no %s of zone %s at %s; events: %+v", kind, z, at.Format("15:04"), rep.Events)
				case ev.LagMs < 0 || time.Duration(ev.LagMs)*time.Millisecond > lagTolerance:
					t.Errorf("%s of zone %s at %s was %d ms late", kind, z, at.Format("15:04"), ev.LagMs)
				case len(ev.Nodes) != 2:
					t.Errorf("%s of zone %s touched nodes %v, want both of the zone", kind, z, ev.Nodes)
				}
			}
		}
	}
	if want < 3 {
		t.Errorf("only %d transitions fell inside the run (%s to %s)", want, rep.VirtualFrom.Format("15:04"), rep.VirtualTo.Format("15:04"))
	}
	t.Logf("%d transitions checked; %d kills, %d restarts, latest %d ms late", want, rep.Kills, rep.Restarts, rep.LagMsMax)
	// The zones left dark were restored: the whole mesh is back.
	for _, s := range m.Status() {
		if !s.Running {
			t.Errorf("node %d not running after the follow ended", s.Index)
		}
	}
	if err := m.WaitConnected(context.Background(), 30*time.Second); err != nil {
		t.Errorf("mesh after the follow: %v", err)
	}
}

// TestCompareTimetable runs a tiny comparison: 4 nodes in two zones cut in
// turn on a fast clock, 20 mixed workflows per routing mode; nothing may
// be lost or fail in either mode.
func TestCompareTimetable(t *testing.T) {
	tier.Faults(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmp, err := testnet.Compare(ctx, testnet.CompareOptions{
		Nodes: 4, Workflows: 20, Rate: 4, Speed: 1800, Seed: 3, Timeout: time.Minute,
		Dir: dir, Binary: bedweBin, Progress: testWriter{t},
	})
	if err != nil {
		t.Fatalf("compare: %v", err)
	}
	for _, r := range cmp.Modes {
		out, _ := json.Marshal(r)
		t.Logf("mode %s: %s", r.Mode, out)
		if r.Submitted != 20 || r.Completed != r.Submitted || r.Lost != 0 || r.Failed != 0 {
			t.Errorf("mode %s: submitted %d, completed %d, failed %d, lost %d %v: %v", r.Mode, r.Submitted, r.Completed, r.Failed, r.Lost, r.LostIDs, r.Errors)
		}
		if r.Kills == 0 {
			t.Errorf("mode %s: the timetable killed nothing during the run", r.Mode)
		}
		if r.Duplicates != 0 {
			t.Errorf("mode %s: %d steps succeeded twice", r.Mode, r.Duplicates)
		}
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(dir, r.Mode, "node-*", "node.log"))
			for _, l := range logs {
				t.Logf("--- %s:\n%s", l, notable(l))
			}
		}
	}
	if len(cmp.Modes) != 2 || cmp.Modes[0].Mode != "timetable" || cmp.Modes[1].Mode != "heartbeat" {
		t.Errorf("modes %v", cmp.Modes)
	}
	if len(cmp.Dark) == 0 {
		t.Error("no cuts recorded")
	}
}

// processRuns reports whether pid is a live (not zombie) process.
func processRuns(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i < 0 || len(stat) <= i+2 || stat[i+2] != 'Z'
}

// gone waits up to limit for pid to exit (a zombie counts as gone).
func gone(pid int, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for processRuns(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// testWriter sends progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
