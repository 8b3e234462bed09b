package service

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"

	"github.com/jonboulle/clockwork"
	"gopkg.in/yaml.v3"
)

// Version is the services file format version this package reads.
const Version = 1

// MaxFileSize bounds a services file, in bytes.
const MaxFileSize = 1 << 20

// Option adjusts how a services file is turned into a Registry.
type Option func(*options)

type options struct {
	clock clockwork.Clock
}

// WithClock makes per-attempt timeouts and the sleep builtins use clock (a
// fake clock in tests). The caller's context deadlines are not affected.
func WithClock(c clockwork.Clock) Option {
	return func(o *options) {
		if c != nil {
			o.clock = c
		}
	}
}

// LoadFile reads and checks the services file at path. An invalid file gives
// an ErrorList whose entries name the file, line and column.
func LoadFile(path string, opts ...Option) (*Registry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("services file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("services file %s: %w", path, err)
	}
	return parse(data, path, opts)
}

// Parse checks a services file held in memory. An invalid file gives an
// ErrorList whose entries carry line and column.
func Parse(data []byte, opts ...Option) (*Registry, error) {
	return parse(data, "", opts)
}

func parse(data []byte, file string, opts []Option) (*Registry, error) {
	o := options{clock: clockwork.NewRealClock()}
	for _, opt := range opts {
		opt(&o)
	}
	p := &parser{file: file, opts: o}
	if len(data) > MaxFileSize {
		p.errorf(nil, "", "file is larger than the %d-byte limit", MaxFileSize)
		return nil, p.errs
	}
	root := p.decode(data)
	if root == nil {
		return nil, p.errs
	}
	r := &Registry{services: map[string]Service{}}
	p.top(root, r)
	if len(p.errs) > 0 {
		return nil, p.errs
	}
	if p.recordPath != "" {
		r.rec = &recorder{path: p.recordPath}
		for _, s := range r.services {
			s.(*bound).rec = r.rec
		}
	}
	return r, nil
}

// parser walks the YAML tree of a services file, collecting errors.
type parser struct {
	file       string
	opts       options
	errs       ErrorList
	recordPath string // the record field, made absolute
}

// errorf records a problem at node n (nil: no position) in field.
func (p *parser) errorf(n *yaml.Node, field, format string, args ...any) {
	if len(p.errs) >= maxErrors {
		return
	}
	e := &Error{File: p.file, Field: field, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Col = n.Line, n.Column
	}
	p.errs = append(p.errs, e)
}

// yamlLine matches the position yaml.v3 puts in its syntax errors.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// decode parses data as exactly one YAML document and returns its root.
func (p *parser) decode(data []byte) (root *yaml.Node) {
	defer func() {
		// yaml.v3 is not ours; a panic on hostile input must not take the
		// node down.
		if v := recover(); v != nil {
			p.errorf(nil, "", "YAML parser failed: %v", v)
			root = nil
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			p.errorf(nil, "", "empty services file; it needs at least \"version: %d\"", Version)
		} else {
			p.yamlError(err)
		}
		return nil
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		p.errorf(&extra, "", "a second YAML document; a services file holds exactly one")
		return nil
	} else if !errors.Is(err, io.EOF) {
		p.yamlError(err)
		return nil
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		p.errorf(&doc, "", "want a YAML mapping with version, services and patterns")
		return nil
	}
	return doc.Content[0]
}

// yamlError records a YAML syntax error, keeping its line number.
func (p *parser) yamlError(err error) {
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		p.errorf(&yaml.Node{Line: line}, "", "YAML syntax: %s", m[2])
		return
	}
	p.errorf(nil, "", "YAML syntax: %v", err)
}

// top checks the file's root mapping.
func (p *parser) top(n *yaml.Node, r *Registry) {
	n = p.resolve(n, "")
	if n == nil {
		return
	}
	if n.Kind != yaml.MappingNode {
		p.errorf(n, "", "want a mapping with version, services and patterns, got %s", describe(n))
		return
	}
	seenVersion := false
	p.mapping(n, "", func(key string, k, v *yaml.Node) {
		switch key {
		case "version":
			seenVersion = true
			p.version(v)
		case "services":
			p.services(v, r)
		case "patterns":
			p.patterns(v, r)
		case "record":
			p.recordPath = p.record(v)
		default:
			p.errorf(k, key, "unknown field (want version, services, patterns or record)")
		}
	})
	if !seenVersion {
		p.errorf(n, "version", "missing; a services file starts with \"version: %d\"", Version)
	}
}

func (p *parser) version(v *yaml.Node) {
	if v.Kind != yaml.ScalarNode || v.Tag != "!!int" {
		p.errorf(v, "version", "want the number %d, got %s", Version, describe(v))
		return
	}
	if ver, err := strconv.Atoi(v.Value); err != nil || ver != Version {
		p.errorf(v, "version", "version %s is not supported; this bedwe reads version %d", v.Value, Version)
	}
}

// services checks the services mapping and fills r.services.
func (p *parser) services(n *yaml.Node, r *Registry) {
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		p.errorf(n, "services", "want a mapping of service name to declaration, got %s", describe(n))
		return
	}
	p.mapping(n, "services", func(name string, k, v *yaml.Node) {
		where := "services." + name
		if msg := checkName(name); msg != "" {
			p.errorf(k, where, "%s", msg)
			return
		}
		d := p.decl(v, where, false)
		if d == nil {
			return
		}
		if rn := p.build(d, v, where); rn != nil {
			r.services[name] = &bound{name: name, r: rn, timeout: d.timeout, expect: d.expectOrDefault(), clock: p.opts.clock, maxConcurrent: d.maxConcurrent}
		}
	})
}

// patterns checks the patterns list and fills r.patterns.
func (p *parser) patterns(n *yaml.Node, r *Registry) {
	if isNull(n) {
		return
	}
	if n.Kind != yaml.SequenceNode {
		p.errorf(n, "patterns", "want a list of {match: GLOB, kind: ...}, got %s", describe(n))
		return
	}
	for i, v := range n.Content {
		where := fmt.Sprintf("patterns[%d]", i)
		v = p.resolve(v, where)
		if v == nil {
			continue
		}
		d := p.decl(v, where, true)
		if d == nil {
			continue
		}
		if rn := p.build(d, v, where); rn != nil {
			r.patterns = append(r.patterns, pattern{match: d.match, r: rn, timeout: d.timeout, expect: d.expectOrDefault(), clock: p.opts.clock, maxConcurrent: d.maxConcurrent})
		}
	}
}

// mapping calls fn for each key of mapping n in order, with aliases
// resolved; it rejects non-string and repeated keys.
func (p *parser) mapping(n *yaml.Node, where string, fn func(key string, k, v *yaml.Node)) {
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := p.resolve(n.Content[i], where)
		if k == nil {
			continue
		}
		if k.Kind != yaml.ScalarNode || isNull(k) {
			p.errorf(k, where, "want a plain name as key, got %s", describe(k))
			continue
		}
		field := join(where, k.Value)
		if seen[k.Value] {
			p.errorf(k, field, "appears twice")
			continue
		}
		seen[k.Value] = true
		v := p.resolve(n.Content[i+1], field)
		if v == nil {
			continue
		}
		fn(k.Value, k, v)
	}
}

// maxAliasDepth bounds alias chains.
const maxAliasDepth = 16

// resolve follows YAML aliases.
func (p *parser) resolve(n *yaml.Node, where string) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode; i++ {
		if i == maxAliasDepth || n.Alias == nil {
			p.errorf(n, where, "YAML alias chain too deep or broken")
			return nil
		}
		n = n.Alias
	}
	return n
}

// join appends key to a dotted field path.
func join(where, key string) string {
	if where == "" {
		return key
	}
	return where + "." + key
}

// isNull reports whether n is an empty or null scalar.
func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// describe names the kind of YAML value n holds, for error messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return "nothing"
		case "!!str":
			return strconv.Quote(n.Value)
		default:
			return n.Value
		}
	case yaml.DocumentNode:
		return "a document"
	}
	return "an alias"
}
