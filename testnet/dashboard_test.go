package testnet_test

import (
	"context"
	"encoding/json"
	"github.com/bedwe/bedwe/internal/tier"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/schedule"
	"github.com/bedwe/bedwe/testnet"
)

// chromiumPath is the Debian package's browser, which the dashboard test
// drives headless.
const chromiumPath = "/usr/bin/chromium"

// dashboardTimetable darkens each of the three zones for a while later in
// the day, so the timetable panel has something to draw; at the clock's
// start (10:00) and speed (real time) every zone stays powered throughout
// the test.
const dashboardTimetable = `format: bedwe-schedule/1
timezone: Africa/Johannesburg
issued_at: "2026-01-01T00:00:00+02:00"
known_until: "2027-12-31T00:00:00+02:00"
zones:
  - name: north
    table: {kind: daily, cumulative: false, rows: [{start: "12:00", end: "14:30"}, {start: "20:00", end: "22:00"}]}
  - name: south
    table: {kind: daily, cumulative: false, rows: [{start: "16:00", end: "18:00"}]}
  - name: east
    table: {kind: daily, cumulative: false, rows: [{start: "02:00", end: "04:30"}]}
`

// TestDashboardInBrowser opens the origin's dashboard in headless
// Chromium while a FORK workflow of sleep steps runs on a three-node
// testnet of real processes, and asserts what the page shows: three
// peers, the workflow running; once it ended, every one of its five steps
// "succeeded" in the step graph and an ok bar per attempt in the trace's
// timeline, and the timetable's three zones. With
// BEDWE_DASHBOARD_SCREENSHOT=FILE (absolute, or relative to testnet/) it
// also saves a screenshot of the page.
//
// It needs /usr/bin/chromium (Debian package chromium): without it the
// test is skipped, unless CI=true, where .ci/run installs it.
func TestDashboardInBrowser(t *testing.T) {
	tier.Faults(t)
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %s is missing: .ci/run installs the Debian package chromium", chromiumPath)
		}
		t.Skipf("skipped: no %s (apt-get install chromium)", chromiumPath)
	}
	sched := filepath.Join(t.TempDir(), "schedule.yaml")
	if err := os.WriteFile(sched, []byte(dashboardTimetable), 0o644); err != nil {
		t.Fatal(err)
	}
	sast := time.FixedZone("SAST", 2*3600)
	m := up(t, testnet.Options{Nodes: 3, Schedule: sched,
		Clock: schedule.VirtualClock{Start: time.Date(2026, 11, 24, 10, 0, 0, 0, sast), Speed: 1}})

	stdout, stderr, code := bedwe(t, "sleepA FORK(sleepB1 sleepB2, sleepC) SYNC sleepD",
		"submit", "-", "--testnet", m.Dir, "-o", "json", "--input", `{"sleep_ms": 2500}`)
	var st api.Status
	if err := json.Unmarshal([]byte(stdout), &st); code != 0 || err != nil {
		t.Fatalf("bedwe submit: exit %d (%v)\n%s%s", code, err, stdout, stderr)
	}
	var url string
	for _, nd := range m.Nodes {
		if nd.PeerID == st.Origin {
			url = "http://" + nd.HTTP + "/"
		}
	}
	if url == "" {
		t.Fatalf("origin %s of %s is no node of the testnet", st.Origin, st.ID)
	}

	// While it runs: the mesh and the running workflow.
	dom := dumpDOM(t, url)
	if n := peerCount(dom); n != 3 {
		t.Errorf("page shows %d peers, want 3\n%s", n, dom)
	}
	if !regexp.MustCompile(`data-workflow="` + st.ID + `" data-state="running"`).MatchString(dom) {
		t.Errorf("page does not show %s running\n%s", st.ID, dom)
	}

	// Once it ended: every step succeeded.
	waitWorkflow(t, url+"api/workflows/"+st.ID)
	dom = dumpDOM(t, url)
	steps := regexp.MustCompile(`class="step [a-z]+" data-path="([^"]+)" data-service="([^"]+)" data-state="([a-z]+)"`).FindAllStringSubmatch(dom, -1)
	if len(steps) != 5 {
		t.Fatalf("page shows %d steps, want 5\n%s", len(steps), dom)
	}
	for _, s := range steps {
		if s[3] != api.StateSucceeded {
			t.Errorf("page shows step %s (%s) %s, want succeeded", s[2], s[1], s[3])
		}
	}
	if n := len(regexp.MustCompile(`class="attempt" data-path="[^"]+" data-outcome="ok"`).FindAllString(dom, -1)); n != 5 {
		t.Errorf("timeline shows %d ok attempts, want 5", n)
	}
	if n := len(regexp.MustCompile(`class="tt-zone"`).FindAllString(dom, -1)); n != 3 {
		t.Errorf("timetable shows %d zones, want 3", n)
	}
	if n := peerCount(dom); n != 3 {
		t.Errorf("page shows %d peers, want 3", n)
	}
	if out := os.Getenv("BEDWE_DASHBOARD_SCREENSHOT"); out != "" {
		abs, err := filepath.Abs(out)
		if err != nil {
			t.Fatal(err)
		}
		chromium(t, "--screenshot="+abs, "--window-size=1400,900", url+"#wf="+st.ID)
		if _, err := os.Stat(abs); err != nil {
			t.Fatalf("chromium wrote no screenshot: %v", err)
		}
		t.Logf("screenshot of %s in %s", url, abs)
	}
}

// peerCount reads the page's peer count (-1: not found).
func peerCount(dom string) int {
	m := regexp.MustCompile(`id="peer-count"[^>]*data-count="(\d+)"`).FindStringSubmatch(dom)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// dumpDOM loads url in headless Chromium and returns the DOM after the
// page's script ran (a few of its one-second polls, in virtual time).
func dumpDOM(t *testing.T, url string) string {
	t.Helper()
	return chromium(t, "--dump-dom", url)
}

func chromium(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=3000"}
	cmd := exec.CommandContext(ctx, chromiumPath, append(base, args...)...)
	var errb limitedBuffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, errb.String())
	}
	return string(out)
}

// limitedBuffer keeps the first 16 KB written to it.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 16<<10 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return string(l.b) }

// waitWorkflow polls the dashboard's JSON for the workflow until it ended
// (succeeded, or the test fails).
func waitWorkflow(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var st api.Status
		resp, err := http.Get(url)
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
		}
		switch {
		case err == nil && st.State == api.StateSucceeded:
			return
		case err == nil && st.State != api.StateRunning:
			t.Fatalf("workflow %s: %s %s", st.ID, st.State, st.Error)
		case time.Now().After(deadline):
			t.Fatalf("workflow did not end within a minute (%s, %v)", st.State, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
