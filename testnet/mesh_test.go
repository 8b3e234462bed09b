package testnet_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/testnet"
)

const fig2 = `S1 S2 FORK(S3 CHOICE(S4, S5) ENDCHOICE S6, S7 S8) SYNC S9 S10`

const fig2Guarded = `S1 S2
FORK(S3 CHOICE(IF(input.priority == "high") S4, ELSE S5) ENDCHOICE S6, S7 S8) SYNC
S9 S10`

// meshServices gives every node the S*, F* and fail* builtins and the FIRST
// test's exec services; nodes 0-3 alone offer A*, nodes 4-7 alone offer B*.
func meshServices(scripts string) func(i int) string {
	return func(i int) string {
		own := `  - {match: "A*", kind: echo}`
		if i >= 4 {
			own = `  - {match: "B*", kind: echo}`
		}
		return fmt.Sprintf(`version: 1
services:
  winner: {kind: exec, command: [%q], timeout: 30s}
  loser: {kind: exec, command: [%q], timeout: 60s}
patterns:
  - {match: "S*", kind: sleep, duration: 30ms}
  - {match: "F*", kind: echo}
  - {match: "fail*", kind: fail, probability: 1}
%s
`, filepath.Join(scripts, "winner.sh"), filepath.Join(scripts, "loser.sh"), own)
	}
}

func writeScripts(t *testing.T, dir string) {
	t.Helper()
	// loser records its pid, then would run for 30 s and leave a marker.
	loser := `#!/bin/sh
cat >/dev/null
echo $$ > "` + dir + `/loser.pid"
sleep 30
touch "` + dir + `/loser.finished"
echo '{"lost": false}'
`
	// winner waits until loser runs, so FIRST has a live loser to stop.
	winner := `#!/bin/sh
cat >/dev/null
i=0
while [ ! -s "` + dir + `/loser.pid" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
echo '{"won": true}'
`
	for name, body := range map[string]string{"loser.sh": loser, "winner.sh": winner} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMesh runs every construct on one 8-node, 3-zone testnet of real
// processes.
func TestMesh(t *testing.T) {
	scripts := t.TempDir()
	writeScripts(t, scripts)
	m := up(t, testnet.Options{
		Nodes: 8, Zones: 3, NoPeerWait: 2 * time.Second,
		NodeServices: meshServices(scripts),
	})
	zoneOf := map[string]string{}
	indexOf := map[string]int{}
	for _, nd := range m.Nodes {
		zoneOf[nd.PeerID] = nd.Zone
		indexOf[nd.PeerID] = nd.Index
	}
	checkTrace := func(t *testing.T, st api.Status) {
		t.Helper()
		for _, e := range st.Trace {
			z, ok := zoneOf[e.Peer]
			if !ok {
				t.Errorf("step %s ran on %s, not a testnet node", e.Service, e.Peer)
			} else if e.Zone != z {
				t.Errorf("step %s reports zone %q but node %d is in %q", e.Service, e.Zone, indexOf[e.Peer], z)
			}
		}
	}

	t.Run("fig2", func(t *testing.T) {
		st := run(t, m, fig2, "")
		if st.State != api.StateSucceeded {
			t.Fatalf("state %s: %s", st.State, st.Error)
		}
		checkTrace(t, st)
		got := ran(st)
		for _, s := range []string{"S1", "S2", "S3", "S6", "S7", "S8", "S9", "S10"} {
			if !slices.Contains(got, s) {
				t.Errorf("%s did not run; ran %v", s, got)
			}
		}
		if slices.Contains(got, "S4") == slices.Contains(got, "S5") {
			t.Errorf("exactly one of S4, S5 must run; ran %v", got)
		}
		if a, b := peerOf(st, "S3"), peerOf(st, "S7"); a == b {
			t.Errorf("FORK branches ran on the same peer %s; want distinct peers", a)
		}
		if len(st.Result) != 9 {
			t.Errorf("result has %d outputs, want 9: %v", len(st.Result), st.Result)
		}
		// Order: S9 starts after both branch ends.
		var s6, s8, s9 time.Time
		for _, e := range st.Trace {
			switch e.Service {
			case "S6":
				s6 = e.End
			case "S8":
				s8 = e.End
			case "S9":
				s9 = e.Start
			}
		}
		if s9.Before(s6) || s9.Before(s8) {
			t.Errorf("S9 started at %v before the FORK's branches ended (%v, %v)", s9, s6, s8)
		}
	})

	t.Run("declared-services-only", func(t *testing.T) {
		st := run(t, m, `A1 B1 FORK(A2 B2, B3 A3) SYNC A4 B4`, "")
		if st.State != api.StateSucceeded {
			t.Fatalf("state %s: %s", st.State, st.Error)
		}
		if len(st.Trace) != 8 {
			t.Errorf("trace has %d entries, want 8", len(st.Trace))
		}
		for _, e := range st.Trace {
			i := indexOf[e.Peer]
			if strings.HasPrefix(e.Service, "A") != (i < 4) {
				t.Errorf("%s ran on node %d, which did not declare it", e.Service, i)
			}
		}
	})

	t.Run("guards", func(t *testing.T) {
		for _, tc := range []struct{ input, want, not string }{
			{`{"priority":"high"}`, "S4", "S5"},
			{`{"priority":"low"}`, "S5", "S4"},
		} {
			st := run(t, m, fig2Guarded, tc.input)
			if st.State != api.StateSucceeded {
				t.Fatalf("input %s: state %s: %s", tc.input, st.State, st.Error)
			}
			got := ran(st)
			if !slices.Contains(got, tc.want) || slices.Contains(got, tc.not) {
				t.Errorf("input %s: ran %v, want %s and not %s", tc.input, got, tc.want, tc.not)
			}
		}
	})

	t.Run("guard-data-from-outputs", func(t *testing.T) {
		// F1 echoes its input; the guard reads the output of an earlier step.
		st := run(t, m, `F1 CHOICE(IF(F1.echo.input.n > 2) F2, ELSE F3) ENDCHOICE`, `{"n": 5}`)
		if st.State != api.StateSucceeded {
			t.Fatalf("state %s: %s", st.State, st.Error)
		}
		if got := ran(st); !slices.Equal(got, []string{"F1", "F2"}) {
			t.Errorf("ran %v, want [F1 F2]", got)
		}
	})

	t.Run("first-stops-losers", func(t *testing.T) {
		st := run(t, m, `FIRST(winner, loser) ENDFIRST F9`, "")
		if st.State != api.StateSucceeded {
			t.Fatalf("state %s: %s", st.State, st.Error)
		}
		if _, ok := st.Result["winner"]; !ok {
			t.Errorf("result lacks the winner: %v", st.Result)
		}
		if _, ok := st.Result["loser"]; ok {
			t.Errorf("result holds the loser's output: %v", st.Result)
		}
		raw, err := os.ReadFile(filepath.Join(scripts, "loser.pid"))
		if err != nil {
			t.Fatalf("the losing branch never started: %v", err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		if err != nil {
			t.Fatalf("loser.pid: %v", err)
		}
		deadline := time.Now().Add(15 * time.Second)
		for !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			if time.Now().After(deadline) {
				t.Fatalf("the losing process %d is still running 15 s after FIRST decided", pid)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if _, err := os.Stat(filepath.Join(scripts, "loser.finished")); err == nil {
			t.Errorf("the losing process ran to completion; FIRST must stop it")
		}
	})

	t.Run("failover-in-order", func(t *testing.T) {
		st := run(t, m, `FAILOVER(fail1, fail2, F3, F4) ENDFAILOVER F5`, "")
		if st.State != api.StateSucceeded {
			t.Fatalf("state %s: %s", st.State, st.Error)
		}
		var order []string
		for _, e := range st.Trace {
			order = append(order, e.Service+":"+string(e.Outcome))
		}
		want := []string{"fail1:failed", "fail2:failed", "F3:ok", "F5:ok"}
		if !slices.Equal(order, want) {
			t.Errorf("trace %v, want %v", order, want)
		}
	})

	t.Run("failing-service", func(t *testing.T) {
		st := run(t, m, `F1 failX F2`, "")
		if st.State != api.StateFailed {
			t.Fatalf("state %s, want failed", st.State)
		}
		for _, want := range []string{"failX", "failed on peer", "zone"} {
			if !strings.Contains(st.Error, want) {
				t.Errorf("error %q does not mention %q", st.Error, want)
			}
		}
		if slices.Contains(ran(st), "F2") {
			t.Errorf("F2 ran after a failed step")
		}
	})

	t.Run("failing-fork-branch", func(t *testing.T) {
		st := run(t, m, `F1 FORK(F2 failY, F3) SYNC F4`, "")
		if st.State != api.StateFailed {
			t.Fatalf("state %s, want failed", st.State)
		}
		if !strings.Contains(st.Error, "FORK branch 1 failed") || !strings.Contains(st.Error, "failY") {
			t.Errorf("error %q should name the FORK branch and the step", st.Error)
		}
		if slices.Contains(ran(st), "F4") {
			t.Errorf("F4 ran after the FORK failed")
		}
	})

	t.Run("undeclared-service", func(t *testing.T) {
		st := run(t, m, `F1 nosuch F2`, "")
		if st.State != api.StateFailed {
			t.Fatalf("state %s, want failed", st.State)
		}
		if !strings.Contains(st.Error, "nosuch") || !strings.Contains(st.Error, "no live peer offers it") {
			t.Errorf("error %q should say no peer offers nosuch", st.Error)
		}
	})

	t.Run("bad-workflow", func(t *testing.T) {
		_, stderr, code := bedwe(t, "F1 FORK(F2) SYNC", "submit", "-", "--testnet", m.Dir)
		if code != 1 || !strings.Contains(stderr, "<stdin>:1:") {
			t.Errorf("exit %d, stderr %q; want exit 1 with a <stdin>:LINE:COL error", code, stderr)
		}
	})

	t.Run("peers", func(t *testing.T) {
		stdout, stderr, code := bedwe(t, "", "peers", "--testnet", m.Dir, "-o", "json")
		if code != 0 {
			t.Fatalf("peers exit %d: %s", code, stderr)
		}
		var peers []api.PeerInfo
		if err := jsonUnmarshal(stdout, &peers); err != nil {
			t.Fatal(err)
		}
		if len(peers) != 8 || !peers[0].Self {
			t.Errorf("peers: got %d (self first: %v), want 8 with self first", len(peers), len(peers) > 0 && peers[0].Self)
		}
	})
}
