package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/bedwe/bedwe/node/service"
)

// nodeSettings is what runNode would read from the flags.
type nodeSettings struct {
	zone, network, logLevel string
	listen, bootstrap       []string
	mdns                    bool
	mdnsSet                 bool
	announce                time.Duration
	replicas                int
}

// runNodeFlags runs `bedwe node ARGS...` in process with the action
// replaced by one that records the flag values, so config.yaml and
// environment handling are tested without starting a node.
func runNodeFlags(t *testing.T, args ...string) (nodeSettings, string, error) {
	t.Helper()
	var got nodeSettings
	cmd := nodeCommand()
	cmd.Action = func(c *cli.Context) error {
		got = nodeSettings{
			zone: c.String("zone"), network: c.String("network"), logLevel: c.String("log-level"),
			listen: c.StringSlice("listen"), bootstrap: c.StringSlice("bootstrap"),
			mdns: c.Bool("mdns"), mdnsSet: c.IsSet("mdns"), announce: c.Duration("announce"), replicas: c.Int("replicas"),
		}
		return nil
	}
	var errb bytes.Buffer
	app := &cli.App{Name: "bedwe", Commands: []*cli.Command{cmd}, Writer: &errb, ErrWriter: &errb, ExitErrHandler: func(*cli.Context, error) {}}
	err := app.Run(append([]string{"bedwe", "node"}, args...))
	return got, errb.String(), err
}

func writeConfig(t *testing.T, dir, text string) string {
	t.Helper()
	path := filepath.Join(dir, nodeConfigFile)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestNodeConfigPrecedence: config.yaml sets what the command line and the
// BEDWE_* environment leave unset; a list replaces the flag's default.
func TestNodeConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, `zone: from-file
listen:
  - /ip4/127.0.0.1/tcp/4101
  - /ip4/127.0.0.1/udp/4101/quic-v1
bootstrap: /ip4/10.0.0.2/tcp/4001/p2p/12D3KooWGzWmG6jK9SCkyRcXjT6qrG9VSUfsFBzMQwZD4P37vCsd
mdns: false
announce: 7s
replicas: 3
network: file-net
`)
	for _, env := range []string{"BEDWE_ZONE", "BEDWE_NETWORK", "BEDWE_ANNOUNCE", "BEDWE_LISTEN", "BEDWE_MDNS", "BEDWE_REPLICAS", "BEDWE_LOG_LEVEL", "BEDWE_BOOTSTRAP"} {
		t.Setenv(env, "")
		os.Unsetenv(env)
	}

	got, out, err := runNodeFlags(t, "--data", dir)
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	want := nodeSettings{
		zone: "from-file", network: "file-net", logLevel: "info",
		listen:    []string{"/ip4/127.0.0.1/tcp/4101", "/ip4/127.0.0.1/udp/4101/quic-v1"},
		bootstrap: []string{"/ip4/10.0.0.2/tcp/4001/p2p/12D3KooWGzWmG6jK9SCkyRcXjT6qrG9VSUfsFBzMQwZD4P37vCsd"},
		mdns:      false, mdnsSet: true, announce: 7 * time.Second, replicas: 3,
	}
	if !equalSettings(got, want) {
		t.Errorf("from config.yaml:\n got %+v\nwant %+v", got, want)
	}

	// The environment beats the file, the command line beats both.
	t.Setenv("BEDWE_ZONE", "from-env")
	t.Setenv("BEDWE_ANNOUNCE", "9s")
	t.Setenv("BEDWE_LOG_LEVEL", "debug")
	t.Setenv("BEDWE_MDNS", "true")
	got, out, err = runNodeFlags(t, "--data", dir, "--announce", "11s", "--listen", "/ip4/0.0.0.0/tcp/9")
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	want.zone, want.announce, want.logLevel, want.mdns = "from-env", 11*time.Second, "debug", true
	want.listen = []string{"/ip4/0.0.0.0/tcp/9"}
	if !equalSettings(got, want) {
		t.Errorf("with BEDWE_* and flags:\n got %+v\nwant %+v", got, want)
	}
	got, out, err = runNodeFlags(t, "--data", dir, "--zone", "from-flag")
	if err != nil || got.zone != "from-flag" {
		t.Errorf("--zone over BEDWE_ZONE over the file: zone %q, err %v\n%s", got.zone, err, out)
	}

	// Without a config file the defaults hold.
	os.Unsetenv("BEDWE_ZONE")
	os.Unsetenv("BEDWE_ANNOUNCE")
	os.Unsetenv("BEDWE_LOG_LEVEL")
	os.Unsetenv("BEDWE_MDNS")
	got, out, err = runNodeFlags(t, "--data", t.TempDir())
	if err != nil || got.zone != "" || got.announce != 5*time.Second || !slices.Equal(got.listen, []string{"/ip4/0.0.0.0/tcp/4001"}) || got.mdnsSet {
		t.Errorf("without config.yaml: %+v, err %v\n%s", got, err, out)
	}
}

func equalSettings(a, b nodeSettings) bool {
	return a.zone == b.zone && a.network == b.network && a.logLevel == b.logLevel &&
		slices.Equal(a.listen, b.listen) && slices.Equal(a.bootstrap, b.bootstrap) &&
		a.mdns == b.mdns && a.mdnsSet == b.mdnsSet && a.announce == b.announce && a.replicas == b.replicas
}

// TestNodeConfigErrors: a mistake in config.yaml is one line naming the
// file, line and column (line only for YAML syntax errors, which is all
// the YAML library gives), and exit status 1.
func TestNodeConfigErrors(t *testing.T) {
	tests := []struct {
		name, text, want string
	}{
		{"unknown key", "zone: a\nzoen: b\n", `:2:1: unknown setting "zoen": the settings are the flags of bedwe node (see bedwe node --help)`},
		{"bad duration", "announce: 5 seconds\n", `:1:11: announce: want a duration like 5s or 2m30s, got "5 seconds"`},
		{"bad bool", "mdns: maybe\n", `:1:7: mdns: want true or false, got "maybe"`},
		{"bad int", "replicas: two\n", `:1:11: replicas: want a whole number, got "two"`},
		{"list for a string", "zone: [a, b]\n", `:1:7: zone: want a single value, not a list or mapping`},
		{"mapping in a list", "listen:\n  - {a: b}\n", `:2:3: listen: want a list of strings`},
		{"empty value", "zone:\n", `:1:6: zone has no value (delete the line or comment it out for the default)`},
		{"twice", "zone: a\nzone: b\n", `:2:1: zone is set twice`},
		{"data", "data: /x\n", `:1:1: data cannot be set in config.yaml: the file lives in the data directory (use --data or BEDWE_DATA)`},
		{"not a mapping", "- zone\n", `:1:1: the node config is a mapping of bedwe node flag names to values (zone: block-7)`},
		{"syntax", "zone: a\n  listen: b\n", `:2: mapping values are not allowed in this context`},
		{"unterminated quote", "zone: \"a\n", `:2: found unexpected end of stream`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := writeConfig(t, dir, tt.text)
			_, out, err := runNodeFlags(t, "--data", dir)
			if exitCode(err) != 1 {
				t.Fatalf("exit %d (err %v), want 1; output %q", exitCode(err), err, out)
			}
			if msg := err.Error(); msg != path+tt.want {
				t.Errorf("error\n got %q\nwant %q", msg, path+tt.want)
			}
			if strings.Contains(err.Error(), "\n") || strings.Contains(out, "goroutine") {
				t.Errorf("not one line: %q / %q", err, out)
			}
		})
	}
}

// TestNodeFlagsAllConfigurable: every flag of bedwe node, including ones
// added later, can be written in config.yaml and has a BEDWE_* variable.
func TestNodeFlagsAllConfigurable(t *testing.T) {
	for _, f := range nodeCommand().Flags {
		name := f.Names()[0]
		if kindOf(f) == kindNone {
			t.Errorf("--%s (%T) cannot be set in config.yaml: teach kindOf and addEnv its type", name, f)
		}
		env, ok := f.(interface{ GetEnvVars() []string })
		if !ok || len(env.GetEnvVars()) == 0 {
			t.Errorf("--%s has no environment variable", name)
		}
	}
}

// TestInitTemplatesParse: the config init writes, with every commented
// default uncommented, is a valid node config; the services template is a
// valid services file offering the hello service.
func TestInitTemplatesParse(t *testing.T) {
	flags := nodeCommand().Flags
	text := nodeConfigText(initSettings{
		data: "/var/lib/bedwe", peerID: "12D3KooWtest", zone: "block 7: east", services: "/var/lib/bedwe/services.yaml",
		listen: []string{"/ip4/0.0.0.0/tcp/4001"}, bootstrap: []string{"/ip4/10.0.0.2/tcp/4001/p2p/12D3KooWGzWmG6jK9SCkyRcXjT6qrG9VSUfsFBzMQwZD4P37vCsd"},
		network: "mesh-1",
	}, flags)
	settings, err := parseNodeConfig("config.yaml", text, flags)
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	values := map[string]string{}
	for _, s := range settings {
		values[s.name] = s.value
	}
	if values["zone"] != "block 7: east" || values["network"] != "mesh-1" || values["services"] != "/var/lib/bedwe/services.yaml" {
		t.Errorf("settings %v\n%s", values, text)
	}
	// Uncomment every "# name: default" line of a flag.
	line := regexp.MustCompile(`(?m)^# ([a-z][a-z0-9-]*): (.*)$`)
	uncommented := 0
	all := line.ReplaceAllStringFunc(string(text), func(m string) string {
		name := line.FindStringSubmatch(m)[1]
		for _, f := range flags {
			if f.Names()[0] == name {
				uncommented++
				return strings.TrimPrefix(m, "# ")
			}
		}
		return m
	})
	if uncommented < 10 {
		t.Fatalf("only %d commented defaults in\n%s", uncommented, text)
	}
	if _, err := parseNodeConfig("config.yaml", []byte(all), flags); err != nil {
		t.Errorf("defaults uncommented: %v\n%s", err, all)
	}

	r, err := service.Parse([]byte(servicesTemplate))
	if err != nil {
		t.Fatalf("services template: %v", err)
	}
	if !r.Offers("hello") {
		t.Errorf("services template offers %v, want hello", r.Names())
	}
}

// TestInitUserMistakes: init refuses what it cannot use.
func TestInitUserMistakes(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--data", dir}, "init needs --zone"},
		{[]string{"--data", dir, "--zone", "a", "--join", "/ip4/10.0.0.2/tcp/4001"}, "want a full multiaddr ending in /p2p/PEER-ID"},
		{[]string{"--data", dir, "--zone", "a", "--listen", "tcp:4001"}, `--listen "tcp:4001"`},
		{[]string{"--data", dir, "--zone", "a", "extra"}, "init takes no arguments"},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		app := &cli.App{Name: "bedwe", Commands: []*cli.Command{initCommand()}, Writer: &out, ErrWriter: &out, ExitErrHandler: func(*cli.Context, error) {}}
		err := app.Run(append([]string{"bedwe", "init"}, tt.args...))
		var ec cli.ExitCoder
		if !errors.As(err, &ec) || ec.ExitCode() != 1 || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("init %v: %v, want exit 1 with %q", tt.args, err, tt.want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a refused init wrote %d files", len(entries))
	}
}
