package node_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bedwe/bedwe/node"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/schedule"
)

// TestDashboardEndpoints runs two real peers (zones east and west) with
// the east/west timetable and --http, runs a FORK workflow at the west
// peer, and reads the dashboard's JSON endpoints and page over HTTP: the
// mesh lists both peers with their zone, power now and east's next cut
// (midnight, an hour ahead of the timetable clock); the workflow list and
// the workflow show it succeeded, with its structure (a fork of two
// branches) and a trace naming every step; the timetable has both zones
// with east dark from midnight to 02:00; the page and its script are
// served; an unknown workflow is 404, a Host that is not loopback 403.
func TestDashboardEndpoints(t *testing.T) {
	sast := time.FixedZone("SAST", 2*3600)
	clock := schedule.VirtualClock{Start: time.Date(2026, 11, 23, 23, 0, 0, 0, sast), Epoch: time.Now(), Speed: 1}
	network := "dash-" + strings.ReplaceAll(t.Name(), "/", "-")
	start := func(zone string, bootstrap []string) api.NodeFile {
		cfg := testConfig(t, node.TestnetConfig(), everythingEcho)
		cfg.Network, cfg.Zone, cfg.Bootstrap, cfg.Clock = network, zone, bootstrap, clock
		cfg.ScheduleFile = filepath.Join(filepath.Dir(cfg.DataDir), "schedule.yaml")
		if err := os.WriteFile(cfg.ScheduleFile, []byte(eastWestTimetable), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg.HTTP = "127.0.0.1:0"
		nf, _ := runNode(t, cfg)
		return nf
	}
	west := start("west", nil)
	east := start("east", west.Addrs)
	waitPeers(t, west, 2)

	final := runWorkflow(t, west.Addrs[0], "A FORK(B1 B2, C) SYNC D")
	if final.State != api.StateSucceeded {
		t.Fatalf("workflow: %s %s", final.State, final.Error)
	}
	base := "http://" + west.HTTP

	var mesh node.DashMesh
	getJSON(t, base+"/api/mesh", &mesh)
	if len(mesh.Peers) != 2 || !mesh.Timetable || mesh.Zone != "west" {
		t.Fatalf("/api/mesh: %d peers, timetable %v, zone %q; want 2 peers, a timetable, west: %+v", len(mesh.Peers), mesh.Timetable, mesh.Zone, mesh)
	}
	midnight := time.Date(2026, 11, 24, 0, 0, 0, 0, sast)
	for _, p := range mesh.Peers {
		switch p.ID {
		case west.PeerID:
			if !p.Self || p.Zone != "west" || !strings.HasPrefix(p.Power, "powered") {
				t.Errorf("/api/mesh: west peer %+v", p)
			}
		case east.PeerID:
			if p.Self || p.Zone != "east" || !strings.HasPrefix(p.Power, "powered") || !p.NextCut.Equal(midnight) || p.Suspected || p.Breaker != "closed" {
				t.Errorf("/api/mesh: east peer %+v, want powered, next cut %v, not suspected, breaker closed", p, midnight)
			}
		default:
			t.Errorf("/api/mesh: unknown peer %s", p.ID)
		}
	}

	var list []node.DashWorkflow
	getJSON(t, base+"/api/workflows", &list)
	if len(list) != 1 || list[0].ID != final.ID || list[0].State != api.StateSucceeded || list[0].StepsDone != 5 || list[0].StepsTotal != 5 {
		t.Fatalf("/api/workflows: %+v, want %s succeeded 5/5", list, final.ID)
	}
	var wf node.DashWorkflow
	getJSON(t, base+"/api/workflows/"+final.ID, &wf)
	if wf.State != api.StateSucceeded || wf.Steps == nil || len(wf.Steps.Children) != 3 || wf.Steps.Children[1].Kind != "fork" || len(wf.Steps.Children[1].Children) != 2 {
		t.Fatalf("/api/workflows/%s: state %s, steps %s", final.ID, wf.State, mustJSON(wf.Steps))
	}
	ran := map[string]bool{}
	for _, e := range wf.Trace {
		if e.Outcome == "ok" && e.Peer != "" && e.Zone != "" && !e.End.Before(e.Start) {
			ran[e.Service] = true
		}
	}
	for _, s := range []string{"A", "B1", "B2", "C", "D"} {
		if !ran[s] {
			t.Errorf("/api/workflows/%s: trace has no ok attempt of %s with peer, zone and times: %s", final.ID, s, mustJSON(wf.Trace))
		}
	}

	var tt node.DashTimetable
	getJSON(t, base+"/api/timetable", &tt)
	if !tt.Timetable || len(tt.Zones) != 2 {
		t.Fatalf("/api/timetable: %s", mustJSON(tt))
	}
	for _, z := range tt.Zones {
		if z.Zone != "east" {
			continue
		}
		dark := false
		for _, w := range z.Windows {
			dark = dark || (w.State == "dark" && w.Start.Equal(midnight) && w.End.Equal(midnight.Add(2*time.Hour)))
		}
		if !dark || z.Windows[0].State != "powered" {
			t.Errorf("/api/timetable: east %s, want powered now and dark 00:00-02:00", mustJSON(z.Windows))
		}
	}

	for path, want := range map[string]string{"/": `id="peer-count"`, "/app.js": "api/mesh", "/style.css": "--ok"} {
		if body := getText(t, base+path, http.StatusOK); !strings.Contains(body, want) {
			t.Errorf("GET %s: no %q", path, want)
		}
	}
	getText(t, base+"/api/workflows/wf-nosuch", http.StatusNotFound)
	req, err := http.NewRequest(http.MethodGet, base+"/api/mesh", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "rebound.example:80"
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("GET /api/mesh with Host %s: %v %v, want 403", req.Host, resp, err)
	} else {
		resp.Body.Close()
	}
	getText(t, base+"/nosuch", http.StatusNotFound)
}

func getText(t *testing.T, url string, status int) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	if resp.StatusCode != status {
		t.Fatalf("GET %s: %s, want %d: %s", url, resp.Status, status, body)
	}
	return string(body)
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(getText(t, url, http.StatusOK)), v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
