package service

import (
	"errors"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// decl is one service declaration as written, checked field by field.
type decl struct {
	kind            string
	timeout, expect time.Duration
	maxConcurrent   int // 0: no limit of its own

	// exec
	command []string
	env     []string
	dir     string
	grace   time.Duration

	// http
	url     string
	headers http.Header

	// sleep
	duration    time.Duration
	hasDuration bool
	fromRequest bool
	field       string
	scale       float64
	max         time.Duration

	// fail
	probability    float64
	hasProbability bool
	seed           int64
	seeded         bool

	// pattern
	match string
}

// maxConcurrentLimit bounds max_concurrent (the node's own limit caps it
// anyway).
const maxConcurrentLimit = 1 << 16

// expectOrDefault is the declared expect, else the kind's natural estimate.
func (d *decl) expectOrDefault() time.Duration {
	switch {
	case d.expect > 0:
		return d.expect
	case d.kind == KindSleep:
		return d.duration
	case d.kind == KindExec, d.kind == KindHTTP:
		return d.timeout
	}
	return 0
}

// kindFields lists each kind's own fields; every kind also takes
// commonFields, and a pattern takes match.
var kindFields = map[string][]string{
	KindExec:  {"command", "dir", "env", "grace"},
	KindHTTP:  {"headers", "url"},
	KindSleep: {"duration", "field", "from_request", "max", "scale"},
	KindEcho:  {},
	KindFail:  {"probability", "seed"},
}

var (
	commonFields = []string{"expect", "kind", "max_concurrent", "timeout"}
	kindNames    = "exec, http, sleep, echo or fail"
)

// decl checks one declaration (a mapping) at where.
func (p *parser) decl(n *yaml.Node, where string, isPattern bool) *decl {
	if n.Kind != yaml.MappingNode {
		p.errorf(n, where, "want a mapping like {kind: sleep, duration: 10ms}, got %s", describe(n))
		return nil
	}
	d := &decl{scale: 1}
	// Find the kind first: it decides which fields are allowed.
	var kindNode *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Kind == yaml.ScalarNode && k.Value == "kind" {
			kindNode = p.resolve(n.Content[i+1], join(where, "kind"))
		}
	}
	switch {
	case kindNode == nil:
		p.errorf(n, join(where, "kind"), "missing (want %s)", kindNames)
		return nil
	case kindNode.Kind != yaml.ScalarNode:
		p.errorf(kindNode, join(where, "kind"), "want one of %s, got %s", kindNames, describe(kindNode))
		return nil
	}
	d.kind = kindNode.Value
	own, ok := kindFields[d.kind]
	if !ok {
		p.errorf(kindNode, join(where, "kind"), "unknown kind %q (want %s)", d.kind, kindNames)
		return nil
	}
	allowed := slices.Concat(commonFields, own)
	if isPattern {
		allowed = append(allowed, "match")
	}
	slices.Sort(allowed)

	errsBefore := len(p.errs)
	seenMatch := false
	p.mapping(n, where, func(key string, k, v *yaml.Node) {
		field := join(where, key)
		if !slices.Contains(allowed, key) {
			p.errorf(k, field, "unknown field for kind %s%s (allowed: %s)", d.kind, belongsTo(key), strings.Join(allowed, ", "))
			return
		}
		switch key {
		case "kind":
		case "timeout":
			d.timeout = p.duration(v, field, true)
		case "expect":
			d.expect = p.duration(v, field, true)
		case "max_concurrent":
			if m := p.int(v, field); m < 1 || m > maxConcurrentLimit {
				p.errorf(v, field, "want a whole number of concurrent executions from 1 to %d, got %s", maxConcurrentLimit, describe(v))
			} else {
				d.maxConcurrent = int(m)
			}
		case "command":
			d.command = p.command(v, field)
		case "env":
			d.env = p.env(v, field)
		case "dir":
			d.dir = p.dir(v, field)
		case "grace":
			d.grace = p.duration(v, field, false)
		case "url":
			d.url = p.url(v, field)
		case "headers":
			d.headers = p.headers(v, field)
		case "duration":
			d.duration, d.hasDuration = p.duration(v, field, false), true
		case "from_request":
			d.fromRequest = p.bool(v, field)
		case "field":
			d.field = p.str(v, field)
			if d.field == "" {
				p.errorf(v, field, "want the name of an input field, like sleep_ms")
			}
		case "scale":
			d.scale = p.float(v, field)
			if !math.IsNaN(d.scale) && d.scale <= 0 {
				p.errorf(v, field, "want a number greater than 0, got %s", describe(v))
			}
		case "max":
			d.max = p.duration(v, field, true)
		case "probability":
			d.probability, d.hasProbability = p.float(v, field), true
			if !math.IsNaN(d.probability) && (d.probability < 0 || d.probability > 1) {
				p.errorf(v, field, "want a number from 0 to 1, got %s", describe(v))
			}
		case "seed":
			d.seed, d.seeded = p.int(v, field), true
		case "match":
			seenMatch = true
			d.match = p.str(v, field)
			if _, err := path.Match(d.match, ""); err != nil || d.match == "" {
				p.errorf(v, field, "want a glob over service names like \"S*\" or \"mProject_*\" (path.Match syntax), got %s", describe(v))
			}
		}
	})
	if isPattern && !seenMatch {
		p.errorf(n, join(where, "match"), "missing: a pattern needs a glob over service names, like match: \"S*\"")
	}
	p.required(n, where, d)
	if len(p.errs) > errsBefore {
		return nil
	}
	return d
}

// required checks the fields each kind cannot do without, and fields that
// only make sense together.
func (p *parser) required(n *yaml.Node, where string, d *decl) {
	switch d.kind {
	case KindExec:
		if d.command == nil {
			p.errorf(n, join(where, "command"), "missing: want a command like [\"/usr/bin/resize\", \"--fast\"]")
		}
	case KindHTTP:
		if d.url == "" {
			p.errorf(n, join(where, "url"), "missing: want a URL like \"http://127.0.0.1:8080/notify\"")
		}
	case KindSleep:
		if !d.hasDuration && !d.fromRequest {
			p.errorf(n, join(where, "duration"), "missing: want a duration like 50ms, or from_request: true")
		}
		if !d.fromRequest && (d.field != "" || d.scale != 1 || d.max != 0) {
			p.errorf(n, where, "field, scale and max apply only with from_request: true")
		}
		if d.field == "" {
			d.field = DefaultSleepField
		}
	case KindFail:
		if !d.hasProbability {
			p.errorf(n, join(where, "probability"), "missing: want a number from 0 to 1, like 0.3")
		}
	}
}

// build makes the runner for a checked declaration.
func (p *parser) build(d *decl, n *yaml.Node, where string) runner {
	switch d.kind {
	case KindExec:
		r, err := newExecRunner(d.command[0], d.command[1:], d.env, d.dir, d.grace)
		if err != nil {
			p.errorf(n, where, "%v", err)
			return nil
		}
		return r
	case KindHTTP:
		return &httpRunner{url: d.url, headers: d.headers}
	case KindSleep:
		return &sleepRunner{clock: p.opts.clock, duration: d.duration, fromRequest: d.fromRequest, field: d.field, scale: d.scale, max: d.max}
	case KindEcho:
		return echoRunner{}
	case KindFail:
		return newFailRunner(d.probability, d.seed, d.seeded)
	}
	return nil
}

// belongsTo hints which kinds take a field that the current kind does not.
func belongsTo(field string) string {
	var kinds []string
	for k, fs := range kindFields {
		if slices.Contains(fs, field) {
			kinds = append(kinds, k)
		}
	}
	if len(kinds) == 0 {
		return ""
	}
	slices.Sort(kinds)
	return "; it belongs to kind " + strings.Join(kinds, ", ")
}

// scalar returns n if it is a non-null scalar, else records an error.
func (p *parser) scalar(n *yaml.Node, field, want string) *yaml.Node {
	if n.Kind != yaml.ScalarNode || isNull(n) {
		p.errorf(n, field, "want %s, got %s", want, describe(n))
		return nil
	}
	return n
}

func (p *parser) str(n *yaml.Node, field string) string {
	if n = p.scalar(n, field, "a string"); n == nil {
		return ""
	}
	if strings.IndexByte(n.Value, 0) >= 0 {
		p.errorf(n, field, "contains a NUL byte")
		return ""
	}
	return n.Value
}

func (p *parser) duration(n *yaml.Node, field string, positive bool) time.Duration {
	const want = "a duration like 30s or 1m30s"
	if n = p.scalar(n, field, want); n == nil {
		return 0
	}
	d, err := time.ParseDuration(n.Value)
	switch {
	case err != nil && (n.Tag == "!!int" || n.Tag == "!!float"):
		p.errorf(n, field, "want a duration with a unit, like %ss, got %s", n.Value, n.Value)
	case err != nil:
		p.errorf(n, field, "want %s, got %s", want, describe(n))
	case positive && d <= 0:
		p.errorf(n, field, "want a duration greater than 0, got %s", n.Value)
	case d < 0:
		p.errorf(n, field, "want a duration of 0 or more, got %s", n.Value)
	}
	return d
}

func (p *parser) bool(n *yaml.Node, field string) bool {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		p.errorf(n, field, "want true or false, got %s", describe(n))
		return false
	}
	var b bool
	if err := n.Decode(&b); err != nil {
		p.errorf(n, field, "want true or false, got %s", describe(n))
	}
	return b
}

func (p *parser) float(n *yaml.Node, field string) float64 {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
		p.errorf(n, field, "want a number, got %s", describe(n))
		return math.NaN()
	}
	var f float64
	if err := n.Decode(&f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		p.errorf(n, field, "want a finite number, got %s", describe(n))
		return math.NaN()
	}
	return f
}

func (p *parser) int(n *yaml.Node, field string) int64 {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		p.errorf(n, field, "want an integer, got %s", describe(n))
		return 0
	}
	var i int64
	if err := n.Decode(&i); err != nil {
		p.errorf(n, field, "want a 64-bit integer, got %s", describe(n))
	}
	return i
}

// stringMap checks a mapping of names to scalar values.
func (p *parser) stringMap(n *yaml.Node, field, want string, fn func(key string, k, v *yaml.Node)) {
	if n.Kind != yaml.MappingNode {
		p.errorf(n, field, "want %s, got %s", want, describe(n))
		return
	}
	p.mapping(n, field, func(key string, k, v *yaml.Node) {
		if v.Kind != yaml.ScalarNode {
			p.errorf(v, join(field, key), "want a plain value, got %s", describe(v))
			return
		}
		fn(key, k, v)
	})
}

func (p *parser) command(n *yaml.Node, field string) []string {
	var argv []string
	switch n.Kind {
	case yaml.ScalarNode:
		argv = []string{p.str(n, field)}
	case yaml.SequenceNode:
		for i, a := range n.Content {
			if a = p.resolve(a, field); a == nil {
				return nil
			}
			argv = append(argv, p.str(a, field+"["+strconv.Itoa(i)+"]"))
		}
	default:
		p.errorf(n, field, "want a list like [\"/usr/bin/resize\", \"--fast\"], got %s", describe(n))
		return nil
	}
	if len(argv) == 0 || argv[0] == "" {
		p.errorf(n, field, "want a program and its arguments, like [\"/usr/bin/resize\", \"--fast\"]")
		return nil
	}
	prog, msg := resolveCommand(argv[0])
	if msg != "" {
		p.errorf(n, field, "%s", msg)
		return nil
	}
	argv[0] = prog
	return argv
}

// resolveCommand returns the absolute path of prog, which must be an
// absolute path to an executable file or a bare name found in PATH now, or
// says why not.
func resolveCommand(prog string) (string, string) {
	if filepath.IsAbs(prog) {
		fi, err := os.Stat(prog)
		switch {
		case err != nil:
			return "", "command " + strconv.Quote(prog) + " (an absolute path) does not exist or cannot be read: " + err.Error()
		case fi.IsDir():
			return "", "command " + strconv.Quote(prog) + " (an absolute path) is a directory"
		case fi.Mode()&0o111 == 0:
			return "", "command " + strconv.Quote(prog) + " (an absolute path) is not executable"
		}
		return prog, ""
	}
	if strings.ContainsRune(prog, '/') {
		return "", "command " + strconv.Quote(prog) + " is a relative path; use an absolute path or a bare name found in PATH"
	}
	found, err := exec.LookPath(prog)
	switch {
	case errors.Is(err, exec.ErrDot):
		return "", "command " + strconv.Quote(prog) + " was found only through a relative PATH entry (" + found + "); use an absolute path"
	case err != nil:
		return "", "command " + strconv.Quote(prog) + " (a bare name) was not found in PATH=" + os.Getenv("PATH")
	}
	if abs, err := filepath.Abs(found); err == nil {
		found = abs
	}
	return found, ""
}

func (p *parser) env(n *yaml.Node, field string) []string {
	var env []string
	p.stringMap(n, field, "a mapping of variable to value, like {LANG: C}", func(key string, k, v *yaml.Node) {
		if strings.ContainsAny(key, "=\x00") {
			p.errorf(k, join(field, key), "an environment variable name cannot contain '=' or NUL")
			return
		}
		if strings.IndexByte(v.Value, 0) >= 0 {
			p.errorf(v, join(field, key), "contains a NUL byte")
			return
		}
		env = append(env, key+"="+v.Value)
	})
	slices.Sort(env)
	return env
}

func (p *parser) dir(n *yaml.Node, field string) string {
	dir := p.str(n, field)
	if dir == "" {
		return ""
	}
	if !filepath.IsAbs(dir) {
		p.errorf(n, field, "want an absolute path, got %q", dir)
		return ""
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		p.errorf(n, field, "%q is not an existing directory", dir)
		return ""
	}
	return dir
}

func (p *parser) url(n *yaml.Node, field string) string {
	s := p.str(n, field)
	if s == "" {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		p.errorf(n, field, "want an absolute http:// or https:// URL, got %q", s)
		return ""
	}
	return s
}

// reservedHeaders are set by bedwe on every http invocation.
var reservedHeaders = []string{"Content-Type", "Content-Length", "Idempotency-Key"}

func (p *parser) headers(n *yaml.Node, field string) http.Header {
	h := http.Header{}
	p.stringMap(n, field, "a mapping of header to value, like {X-Key: abc}", func(key string, k, v *yaml.Node) {
		f := join(field, key)
		switch {
		case !validHeaderName(key):
			p.errorf(k, f, "not a valid HTTP header name")
		case slices.Contains(reservedHeaders, http.CanonicalHeaderKey(key)):
			p.errorf(k, f, "set by bedwe on every request; it cannot be configured")
		case strings.ContainsAny(v.Value, "\r\n\x00"):
			p.errorf(v, f, "a header value cannot contain CR, LF or NUL")
		default:
			h.Add(key, v.Value)
		}
	})
	return h
}

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		ok := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
		if !ok {
			return false
		}
	}
	return true
}
