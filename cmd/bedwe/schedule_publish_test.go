package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/bedwe/bedwe/node"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/schedule"
)

// runSchedulePub runs "bedwe schedule ARGS..." in process with stdin and
// returns stdout, stderr and the exit code.
func runSchedulePub(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	return runScheduleIn(t, clockwork.NewRealClock(), stdin, args...)
}

// startScheduleNode runs a node in process whose data directory is
// returned; trustSelf says whether it trusts its own key.
func startScheduleNode(t *testing.T, trustSelf bool) string {
	t.Helper()
	dir := t.TempDir()
	key, pub, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := crypto.MarshalPrivateKey(key)
	if err := os.WriteFile(filepath.Join(dir, "identity.key"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := node.TestnetConfig()
	cfg.DataDir = dir
	cfg.Listen = []string{"/ip4/127.0.0.1/tcp/0"}
	cfg.Network = "test-cli-" + filepath.Base(dir)
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if trustSelf {
		rawPub, _ := pub.Raw()
		cfg.TrustedKeys = [][]byte{rawPub}
	}
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan api.NodeFile, 1)
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx, func(nf api.NodeFile) { ready <- nf }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("node: %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("node stopped at start: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("node did not start within 30s")
	}
	return dir
}

// scheduleIssuedAt rewrites the rotation example's issued_at.
func scheduleIssuedAt(t *testing.T, issued string) string {
	t.Helper()
	raw, err := os.ReadFile(rotationExample)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(raw), `issued_at: "2025-01-01T00:00:00+02:00"`, `issued_at: "`+issued+`"`, 1)
	return strings.Replace(s, `known_until: "2027-01-01T00:00:00+02:00"`, `known_until: "2099-01-01T00:00:00+02:00"`, 1)
}

func TestSchedulePublishCLI(t *testing.T) {
	dir := startScheduleNode(t, true)
	files := t.TempDir()
	newer := filepath.Join(files, "newer.yaml")
	if err := os.WriteFile(newer, []byte(scheduleIssuedAt(t, "2026-02-01T00:00:00+02:00")), 0o644); err != nil {
		t.Fatal(err)
	}

	// key: the base64 key on stdout, as node.json has it.
	out, errOut, code := runSchedulePub(t, "", "key", "--data", dir)
	nf, err := os.ReadFile(filepath.Join(dir, "node.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file api.NodeFile
	_ = json.Unmarshal(nf, &file)
	if code != 0 || strings.TrimSpace(out) != file.PublicKey || !strings.Contains(errOut, "ed25519:") {
		t.Fatalf("schedule key: code %d, stdout %q (want %q), stderr %q", code, out, file.PublicKey, errOut)
	}
	if _, err := schedule.ParsePublicKey(strings.TrimSpace(out)); err != nil {
		t.Errorf("schedule key prints %q, which --trust does not read: %v", out, err)
	}

	// nothing yet
	out, _, code = runSchedulePub(t, "", "current", "--data", dir)
	if code != 0 || !strings.Contains(out, "holds no timetable") {
		t.Fatalf("schedule current before publishing: code %d, %q", code, out)
	}

	// publish FILE (flags after the file)
	out, errOut, code = runSchedulePub(t, "", "publish", newer, "--data", dir)
	if code != 0 || !strings.Contains(out, "published "+newer) || !strings.Contains(out, "issued_at 2026-02-01T00:00:00+02:00") ||
		!strings.Contains(out, "2 zone(s) (east, west)") || !strings.Contains(out, "signed by peer") {
		t.Fatalf("schedule publish: code %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "schedule.signed.json")); err != nil {
		t.Errorf("the published timetable is not persisted: %v", err)
	}

	// an older one from stdin, as JSON: not adopted, exit 1, says which is newer
	out, errOut, code = runSchedulePub(t, scheduleIssuedAt(t, "2026-01-01T00:00:00+02:00"), "publish", "-", "-o", "json", "--data", dir)
	var res api.PublishResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("publish -o json: %v\n%s", err, out)
	}
	if code != 1 || res.Adopted || res.InForce == nil || !strings.Contains(errOut, "issued at 2026-02-01T00:00:00+02:00") ||
		!strings.Contains(errOut, "later than stdin") || !strings.Contains(errOut, "raise issued_at") {
		t.Fatalf("publishing an older timetable: code %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}

	// current shows the signed one
	out, _, code = runSchedulePub(t, "", "current", "--data", dir, "-o", "json")
	var info api.ScheduleInfo
	if err := json.Unmarshal([]byte(out), &info); err != nil || code != 0 {
		t.Fatalf("schedule current -o json: %v, code %d\n%s", err, code, out)
	}
	if info.Source != api.ScheduleSigned || info.IssuedAt.Format(time.RFC3339) != "2026-02-01T00:00:00+02:00" || !strings.HasPrefix(info.Signer, "ed25519:") {
		t.Errorf("schedule current: %+v", info)
	}

	// a bad file is reported with FILE:LINE:COL before any node is asked
	bad := filepath.Join(files, "bad.yaml")
	_ = os.WriteFile(bad, []byte(strings.Replace(scheduleIssuedAt(t, "2026-03-01T00:00:00+02:00"), `start: "00:00", end: "02:00"`, `start: "25:00", end: "02:00"`, 1)), 0o644)
	_, errOut, code = runSchedulePub(t, "", "publish", bad, "--data", filepath.Join(files, "no-node"))
	if code != 1 || !strings.Contains(errOut, bad+":19:11: error:") || !strings.Contains(errOut, "nothing published") {
		t.Errorf("publishing a bad file: code %d, stderr %q", code, errOut)
	}
	// user mistakes
	for _, args := range [][]string{
		{"publish"},
		{"publish", "a.yaml", "b.yaml"},
		{"publish", filepath.Join(files, "missing.yaml"), "--data", dir},
		{"publish", newer, "--data", filepath.Join(files, "no-node")},
		{"key", "--data", filepath.Join(files, "no-node")},
	} {
		_, errOut, code := runSchedulePub(t, "", args...)
		if code != 1 || errOut == "" || strings.Contains(errOut, "goroutine") {
			t.Errorf("schedule %v: code %d, stderr %q; want a one-line user error", args, code, errOut)
		}
	}
}

func TestSchedulePublishUntrustedNode(t *testing.T) {
	dir := startScheduleNode(t, false)
	key, _, _ := runSchedulePub(t, "", "key", "--data", dir)
	_, errOut, code := runSchedulePub(t, scheduleIssuedAt(t, "2026-02-01T00:00:00+02:00"), "publish", "-", "--data", dir)
	if code != 1 || !strings.Contains(errOut, strings.TrimSpace(key)) || !strings.Contains(errOut, "--trusted-keys") {
		t.Fatalf("publishing from a node that does not trust itself: code %d, stderr %q; want a refusal naming key %s", code, errOut, key)
	}
	if _, err := os.Stat(filepath.Join(dir, "schedule.signed.json")); err == nil {
		t.Error("the refused timetable was persisted")
	}
}
