package main

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"gopkg.in/yaml.v3"
)

// nodeConfigFile is the node configuration inside the data directory, written
// by `bedwe init` and read by `bedwe node`.
const nodeConfigFile = "config.yaml"

// envPrefix starts the environment variable of every node flag: --log-level
// is BEDWE_LOG_LEVEL.
const envPrefix = "BEDWE_"

// withConfigFile makes every flag of the node command settable from
// DATA/config.yaml and from a BEDWE_* environment variable, whoever added the
// flag: a flag without environment variables gets BEDWE_<NAME> (urfave/cli
// reads it), and before the action runs, every setting of the file whose flag
// urfave/cli did not set from the command line or the environment is set with
// cli.Context.Set, as urfave/cli's altsrc package does (altsrc itself would
// add a TOML module to go.mod). Precedence: the command line, the
// environment, config.yaml, the flag's default. --data cannot come from the
// file (the file lives in it).
func withConfigFile(cmd *cli.Command) *cli.Command {
	for _, f := range cmd.Flags {
		addEnv(f)
	}
	before := cmd.Before
	cmd.Before = func(c *cli.Context) error {
		if err := applyNodeConfig(c); err != nil {
			return err
		}
		if before != nil {
			return before(c)
		}
		return nil
	}
	return cmd
}

// flagEnv is the environment variable withConfigFile gives a flag.
func flagEnv(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// addEnv gives f the environment variable BEDWE_<NAME> unless it has some.
func addEnv(f cli.Flag) {
	var env *[]string
	switch f := f.(type) {
	case *cli.StringFlag:
		env = &f.EnvVars
	case *cli.PathFlag:
		env = &f.EnvVars
	case *cli.StringSliceFlag:
		env = &f.EnvVars
	case *cli.BoolFlag:
		env = &f.EnvVars
	case *cli.IntFlag:
		env = &f.EnvVars
	case *cli.Int64Flag:
		env = &f.EnvVars
	case *cli.UintFlag:
		env = &f.EnvVars
	case *cli.Uint64Flag:
		env = &f.EnvVars
	case *cli.Float64Flag:
		env = &f.EnvVars
	case *cli.DurationFlag:
		env = &f.EnvVars
	default:
		return
	}
	if len(*env) == 0 {
		*env = []string{flagEnv(f.Names()[0])}
	}
}

// configKind is how a flag's value is written in config.yaml.
type configKind int

const (
	kindNone configKind = iota // not settable from the file
	kindString
	kindStrings
	kindBool
	kindInt
	kindUint
	kindFloat
	kindDuration
)

// kindOf says how f reads from the file.
func kindOf(f cli.Flag) configKind {
	switch f.(type) {
	case *cli.StringFlag, *cli.PathFlag:
		return kindString
	case *cli.StringSliceFlag:
		return kindStrings
	case *cli.BoolFlag:
		return kindBool
	case *cli.IntFlag, *cli.Int64Flag:
		return kindInt
	case *cli.UintFlag, *cli.Uint64Flag:
		return kindUint
	case *cli.Float64Flag:
		return kindFloat
	case *cli.DurationFlag:
		return kindDuration
	}
	return kindNone
}

// applyNodeConfig reads DATA/config.yaml, when there is one, into the flags
// the command line and the environment left unset.
func applyNodeConfig(c *cli.Context) error {
	path := filepath.Join(c.String("data"), nodeConfigFile)
	src, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return cli.Exit(fmt.Sprintf("read node config: %v", err), 1)
	}
	settings, err := parseNodeConfig(path, src, c.Command.Flags)
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	for _, s := range settings {
		if c.IsSet(s.name) { // the command line or the environment
			continue
		}
		if err := c.Set(s.name, s.value); err != nil {
			return cli.Exit(fmt.Sprintf("%s:%d:%d: %s: %v", path, s.line, s.col, s.name, err), 1)
		}
	}
	return nil
}

// setting is one flag value from the node config, in the form
// cli.Context.Set takes.
type setting struct {
	name, value string
	line, col   int
}

// yamlLine matches yaml.v3's syntax errors, which carry a line but no column.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parseNodeConfig checks a node config file against flags and returns its
// settings in file order. Errors are one line: FILE:LINE:COL: message
// (FILE:LINE: for YAML syntax errors, which have no column).
func parseNodeConfig(path string, src []byte, flags []cli.Flag) ([]setting, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		msg := err.Error()
		if m := yamlLine.FindStringSubmatch(msg); m != nil {
			return nil, fmt.Errorf("%s:%s: %s", path, m[1], m[2])
		}
		return nil, fmt.Errorf("%s: %s", path, strings.TrimPrefix(msg, "yaml: "))
	}
	if len(doc.Content) == 0 {
		return nil, nil // only comments
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:%d:%d: the node config is a mapping of bedwe node flag names to values (zone: block-7)", path, top.Line, top.Column)
	}
	var out []setting
	seen := map[string]bool{}
	byName := map[string]cli.Flag{}
	for _, f := range flags {
		for _, n := range f.Names() {
			byName[n] = f
		}
	}
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		at := func(n *yaml.Node, format string, args ...any) error {
			return fmt.Errorf("%s:%d:%d: %s", path, n.Line, n.Column, fmt.Sprintf(format, args...))
		}
		name := k.Value
		if k.Kind != yaml.ScalarNode {
			return nil, at(k, "a setting's name must be a flag name")
		}
		if name == "data" {
			return nil, at(k, "data cannot be set in %s: the file lives in the data directory (use --data or BEDWE_DATA)", nodeConfigFile)
		}
		f, ok := byName[name]
		if !ok || name == "help" || name == "h" {
			return nil, at(k, "unknown setting %q: the settings are the flags of bedwe node (see bedwe node --help)", name)
		}
		primary := f.Names()[0]
		if seen[primary] {
			return nil, at(k, "%s is set twice", name)
		}
		seen[primary] = true
		kind := kindOf(f)
		if kind == kindNone {
			return nil, at(k, "--%s cannot be set in %s; give it on the command line", name, nodeConfigFile)
		}
		if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
			return nil, at(v, "%s has no value (delete the line or comment it out for the default)", name)
		}
		val, err := configValue(kind, v)
		if err != nil {
			return nil, at(v, "%s: %v", name, err)
		}
		out = append(out, setting{name: primary, value: val, line: k.Line, col: k.Column})
	}
	return out, nil
}

// configValue decodes one setting into the text cli.Context.Set takes.
func configValue(kind configKind, v *yaml.Node) (string, error) {
	if kind == kindStrings {
		switch v.Kind {
		case yaml.ScalarNode:
			return cli.NewStringSlice(v.Value).Serialize(), nil
		case yaml.SequenceNode:
			var list []string
			for _, e := range v.Content {
				if e.Kind != yaml.ScalarNode || e.Tag == "!!null" {
					return "", fmt.Errorf("want a list of strings")
				}
				list = append(list, e.Value)
			}
			// The serialized form replaces the default as a whole and
			// is not split at commas.
			return cli.NewStringSlice(list...).Serialize(), nil
		}
		return "", fmt.Errorf("want a string or a list of strings")
	}
	if v.Kind != yaml.ScalarNode {
		return "", fmt.Errorf("want a single value, not a list or mapping")
	}
	switch kind {
	case kindString:
		return v.Value, nil
	case kindBool:
		var b bool
		if v.Tag != "!!bool" || v.Decode(&b) != nil {
			return "", fmt.Errorf("want true or false, got %q", v.Value)
		}
		return strconv.FormatBool(b), nil
	case kindInt:
		var n int64
		if v.Tag != "!!int" || v.Decode(&n) != nil {
			return "", fmt.Errorf("want a whole number, got %q", v.Value)
		}
		return strconv.FormatInt(n, 10), nil
	case kindUint:
		var n uint64
		if v.Tag != "!!int" || v.Decode(&n) != nil {
			return "", fmt.Errorf("want a non-negative whole number, got %q", v.Value)
		}
		return strconv.FormatUint(n, 10), nil
	case kindFloat:
		var x float64
		if (v.Tag != "!!float" && v.Tag != "!!int") || v.Decode(&x) != nil || math.IsNaN(x) {
			return "", fmt.Errorf("want a number, got %q", v.Value)
		}
		return strconv.FormatFloat(x, 'g', -1, 64), nil
	case kindDuration:
		d, err := time.ParseDuration(v.Value)
		if err != nil {
			return "", fmt.Errorf("want a duration like 5s or 2m30s, got %q", v.Value)
		}
		return d.String(), nil
	}
	return "", fmt.Errorf("unsupported setting")
}
