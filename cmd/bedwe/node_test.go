package main

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

// TestNodeMetricsFlags: a non-loopback --http is refused, whether it comes
// from the command line, BEDWE_HTTP or config.yaml, with a message naming
// --http-public; --pprof needs --http. No node starts.
func TestNodeMetricsFlags(t *testing.T) {
	tests := []struct {
		name, config, env string
		args              []string
		want              string
	}{
		{name: "flag", args: []string{"--http", "0.0.0.0:9464"}, want: "add --http-public"},
		{name: "env", env: "192.168.1.7:9464", want: "--http 192.168.1.7:9464 is not a loopback address"},
		{name: "config", config: "http: \":9464\"\n", want: "every address of this machine"},
		{name: "pprof", args: []string{"--pprof"}, want: "--pprof is served on the --http listener"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.config != "" {
				writeConfig(t, dir, tt.config)
			}
			t.Setenv("BEDWE_HTTP", tt.env) // restored after the test
			if tt.env == "" {
				os.Unsetenv("BEDWE_HTTP") // set but empty would hide config.yaml
			}
			var out bytes.Buffer
			app := &cli.App{Name: "bedwe", Commands: []*cli.Command{nodeCommand()}, Writer: &out, ErrWriter: &out, ExitErrHandler: func(*cli.Context, error) {}}
			args := append([]string{"bedwe", "node", "--data", dir, "--listen", "/ip4/127.0.0.1/tcp/0", "--mdns=false"}, tt.args...)
			done := make(chan error, 1)
			go func() { done <- app.Run(args) }()
			var err error
			select {
			case err = <-done:
			case <-time.After(20 * time.Second):
				t.Fatalf("node %v started instead of refusing", tt.args) // and runs until the test binary exits
			}
			var ec cli.ExitCoder
			if !errors.As(err, &ec) || ec.ExitCode() != 1 || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("node %v: %v, want exit 1 with one line containing %q", tt.args, err, tt.want)
			}
		})
	}
}
