package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bedwe/bedwe/node/api"
)

// buildBedwe builds the bedwe binary into a temporary directory.
func buildBedwe(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bedwe")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build bedwe: %v\n%s", err, out)
	}
	return bin
}

// runBin runs the binary with env added to the test's environment and
// returns stdout, stderr and the exit code.
func runBin(t *testing.T, bin string, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %v: %v", bin, args, err)
	}
	return out.String(), errb.String(), code
}

// TestInitThenNode is the board setup end to end with the real binary:
// bedwe init writes the identity, config.yaml and services.yaml and prints
// what a neighbour needs; bedwe node --data DIR then starts from the file
// alone (BEDWE_* variables override it); a failing service is reported as
// a failure, not a timeout; submit reports a workflow's text errors as
// check does.
func TestInitThenNode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts a node")
	}
	bin := buildBedwe(t)
	dir := filepath.Join(t.TempDir(), "board")

	out, errOut, code := runBin(t, bin, nil, "init", "--data", dir, "--zone", "block-7", "--listen", "/ip4/127.0.0.1/tcp/0", "-o", "json")
	if code != 0 {
		t.Fatalf("init: exit %d\n%s%s", code, out, errOut)
	}
	var rep initReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("init -o json: %v\n%s", err, out)
	}
	if !rep.IdentityCreated || !rep.ServicesWritten || rep.Zone != "block-7" || rep.Config != filepath.Join(dir, "config.yaml") ||
		len(rep.Addrs) != 1 || rep.Addrs[0] != "/ip4/127.0.0.1/tcp/0/p2p/"+rep.PeerID {
		t.Errorf("init report %+v", rep)
	}
	key, _, code := runBin(t, bin, nil, "schedule", "key", "--data", dir)
	if code != 0 || strings.TrimSpace(key) != rep.PublicKey {
		t.Errorf("init prints public key %q, schedule key prints %q", rep.PublicKey, key)
	}
	// The text form says the same.
	cfgBefore, _ := os.ReadFile(rep.Config)
	out, errOut, code = runBin(t, bin, nil, "init", "--data", dir, "--zone", "other")
	if code != 1 || !strings.Contains(errOut, "config.yaml exists") {
		t.Errorf("second init: exit %d, stderr %q", code, errOut)
	}
	if after, _ := os.ReadFile(rep.Config); !bytes.Equal(after, cfgBefore) {
		t.Error("a refused init changed config.yaml")
	}
	out, errOut, code = runBin(t, bin, nil, "init", "--data", dir, "--zone", "block-7", "--listen", "/ip4/127.0.0.1/tcp/0", "--force")
	if code != 0 || !strings.Contains(out, "identity  "+filepath.Join(dir, "identity.key")+" (kept)") ||
		!strings.Contains(out, "/ip4/127.0.0.1/tcp/0/p2p/"+rep.PeerID) || !strings.Contains(out, rep.PublicKey) {
		t.Errorf("init --force: exit %d\n%s%s", code, out, errOut)
	}

	svc, err := os.ReadFile(rep.Services)
	if err != nil {
		t.Fatal(err)
	}
	// A service that fails at once, with its own timeout in the services
	// file (boom) and without (crash: the node's default step timeout
	// bounds it); one that outlives its own timeout (slow).
	boom := `  boom: {kind: exec, command: ["/bin/sh", "-c", "echo 'disk full' >&2; exit 3"], timeout: 10s}` + "\n" +
		`  crash: {kind: exec, command: ["/bin/sh", "-c", "echo 'disk full' >&2; exit 3"]}` + "\n" +
		`  slow: {kind: sleep, duration: 1m, timeout: 100ms}` + "\n"
	svc = bytes.Replace(svc, []byte("  hello: {kind: echo}\n"), []byte("  hello: {kind: echo}\n"+boom), 1)
	if err := os.WriteFile(rep.Services, svc, 0o644); err != nil {
		t.Fatal(err)
	}

	// bedwe node --data DIR and nothing else; the environment keeps the
	// node off mDNS and in a network of its own (other tests run nodes).
	network := "test-init-" + filepath.Base(filepath.Dir(dir))
	node := exec.Command(bin, "node", "--data", dir)
	node.Env = append(os.Environ(), "BEDWE_MDNS=false", "BEDWE_NETWORK="+network, "BEDWE_PROFILE=testnet")
	stderr, err := node.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	var logTail bytes.Buffer
	stopped := make(chan error, 1)
	running := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			logTail.WriteString(sc.Text() + "\n") // read only after stopped
			if !once && strings.Contains(sc.Text(), `msg="node running"`) {
				once = true
				close(running)
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		stopped <- node.Wait()
	}()
	t.Cleanup(func() {
		_ = node.Process.Signal(syscall.SIGTERM)
		select {
		case <-stopped:
		case <-time.After(20 * time.Second):
			_ = node.Process.Kill()
			<-stopped
		}
		if t.Failed() {
			t.Logf("node log:\n%s", logTail.String())
		}
	})
	select {
	case <-running:
	case err := <-stopped:
		t.Fatalf("node exited at start: %v\n%s", err, logTail.String())
	case <-time.After(60 * time.Second):
		t.Fatal("node did not start within 60s")
	}
	raw, err := os.ReadFile(filepath.Join(dir, "node.json"))
	if err != nil {
		t.Fatal(err)
	}
	var nf api.NodeFile
	if err := json.Unmarshal(raw, &nf); err != nil {
		t.Fatal(err)
	}
	if nf.PeerID != rep.PeerID || nf.Zone != "block-7" || nf.Network != network || len(nf.Addrs) == 0 || !strings.HasPrefix(nf.Addrs[0], "/ip4/127.0.0.1/tcp/") {
		t.Errorf("node.json %+v: want peer %s, zone block-7 (config.yaml), network %s (BEDWE_NETWORK), 127.0.0.1", nf, rep.PeerID, network)
	}

	work := t.TempDir()
	wf := filepath.Join(work, "boom.bedwe")
	if err := os.WriteFile(wf, []byte("hello boom\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = runBin(t, bin, nil, "submit", wf, "--data", dir, "--wait")
	if code != 2 || !strings.Contains(errOut, `after 1 attempt(s): service "boom" failed: exit status 3; stderr: "disk full"`) {
		t.Errorf("submit of a failing step: exit %d, want 2 and the service's failure\n%s", code, errOut)
	}
	if strings.Contains(errOut, "timed out") {
		t.Errorf("a failure reported as a timeout:\n%s", errOut)
	}
	if !strings.Contains(errOut, "[1/2] hello") {
		t.Errorf("progress lacks [1/2] hello:\n%s", errOut)
	}
	for svc, want := range map[string]string{
		"crash": `after 1 attempt(s): service "crash" failed: exit status 3; stderr: "disk full"`,
		"slow":  `after 1 attempt(s): service "slow" timed out after 100ms (its timeout)`,
	} {
		wf := filepath.Join(work, svc+".bedwe")
		if err := os.WriteFile(wf, []byte(svc+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, errOut, code := runBin(t, bin, nil, "submit", wf, "--data", dir, "--wait")
		if code != 2 || !strings.Contains(errOut, want) || strings.Contains(errOut, "10m0s") {
			t.Errorf("submit %s: exit %d, want 2 and %q\n%s", svc, code, want, errOut)
		}
	}

	bad := filepath.Join(work, "bad.bedwe")
	if err := os.WriteFile(bad, []byte("A \xff"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, checkErr, checkCode := runBin(t, bin, nil, "check", bad)
	out, errOut, code = runBin(t, bin, nil, "submit", bad, "--data", dir)
	want := bad + ":1:3: invalid UTF-8 byte 0xff in input\n"
	if code != 1 || errOut != want || checkCode != 1 || checkErr != want || out != "" {
		t.Errorf("submit of invalid UTF-8: exit %d, stderr %q; check: exit %d, stderr %q; want %q from both", code, errOut, checkCode, checkErr, want)
	}
}

// TestInitMembership: bedwe init takes the mesh's membership files, checks
// them before writing anything, copies them into DATA (the key 0600),
// names them in config.yaml (which bedwe node reads), creates the board's
// CLI key and prints its ID; a bad key file is refused in one line.
func TestInitMembership(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBedwe(t)
	tmp := t.TempDir()
	key := filepath.Join(tmp, "swarm.key")
	if out, errOut, code := runBin(t, bin, nil, "swarm-key", "-o", key); code != 0 {
		t.Fatalf("swarm-key: %d %s%s", code, out, errOut)
	}
	peers := filepath.Join(tmp, "peers")
	if err := os.WriteFile(peers, []byte("# members\n12D3KooWGRUVh8fQ2pxN4cFh2n5VEWkm8JzbdZf6XqqSQ7WXaWfD  # a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(tmp, "bad.key")
	if err := os.WriteFile(bad, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, "board")
	_, errOut, code := runBin(t, bin, nil, "init", "--data", dir, "--zone", "z", "--swarm-key", bad)
	if code != 1 || !strings.Contains(errOut, "--swarm-key") || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
		t.Errorf("bad key: exit %d, stderr %q; want one line naming --swarm-key", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "config.yaml")); err == nil {
		t.Error("a refused init wrote config.yaml")
	}

	out, errOut, code := runBin(t, bin, nil, "init", "--data", dir, "--zone", "z", "--listen", "/ip4/127.0.0.1/tcp/0",
		"--swarm-key", key, "--trusted-peers", peers, "--clients", peers, "-o", "json")
	if code != 0 {
		t.Fatalf("init: exit %d\n%s%s", code, out, errOut)
	}
	var rep initReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.SwarmKey != filepath.Join(dir, "swarm.key") || rep.TrustedPeers != filepath.Join(dir, "trusted-peers") || rep.Clients != filepath.Join(dir, "clients") {
		t.Errorf("report names %q %q %q", rep.SwarmKey, rep.TrustedPeers, rep.Clients)
	}
	if info, err := os.Stat(rep.SwarmKey); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("copied key: %v %v, want mode 0600", info, err)
	}
	orig, _ := os.ReadFile(key)
	if copied, _ := os.ReadFile(rep.SwarmKey); !bytes.Equal(orig, copied) {
		t.Error("the copied key differs")
	}
	id, _, code := runBin(t, bin, nil, "id", "--client", "--data", dir)
	if code != 0 || strings.TrimSpace(id) != rep.ClientID || rep.ClientID == "" {
		t.Errorf("init printed client ID %q, bedwe id --client says %q", rep.ClientID, id)
	}
	cfg, err := os.ReadFile(rep.Config)
	if err != nil {
		t.Fatal(err)
	}
	settings, err := parseNodeConfig(rep.Config, cfg, nodeCommand().Flags)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range settings {
		got[s.name] = s.value
	}
	for flag, want := range map[string]string{"swarm-key": rep.SwarmKey, "trusted-peers": rep.TrustedPeers, "clients": rep.Clients} {
		if got[flag] != want {
			t.Errorf("config.yaml %s = %q, want %q", flag, got[flag], want)
		}
	}
}
