package service

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"time"

	"github.com/jonboulle/clockwork"
)

// Registry is the set of services a peer declares. It is immutable once built
// and safe for concurrent use.
type Registry struct {
	services map[string]Service
	patterns []pattern
	rec      *recorder // nil: no record file
}

// pattern declares a service for every name matching a glob.
type pattern struct {
	match   string
	r       runner // shared by every name the pattern matches
	timeout time.Duration
	expect  time.Duration
	clock   clockwork.Clock
	// maxConcurrent limits concurrent executions of all the names the
	// pattern matches together (0: no limit of its own).
	maxConcurrent int
}

// NewRegistry builds a registry from services by name, for embedding bedwe
// and for tests. Names must be valid workflow service names.
func NewRegistry(services map[string]Service) (*Registry, error) {
	r := &Registry{services: make(map[string]Service, len(services))}
	for name, s := range services {
		if msg := checkName(name); msg != "" {
			return nil, fmt.Errorf("service %q: %s", name, msg)
		}
		if s == nil {
			return nil, fmt.Errorf("service %q: nil Service", name)
		}
		r.services[name] = s
	}
	return r, nil
}

// DefaultSleep is how long the services of a Default registry sleep when the
// request names no time.
const DefaultSleep = 10 * time.Millisecond

// Default returns a registry for testnets in which every service name that
// matches one of patterns ("*" when none are given) is a sleep builtin: it
// sleeps for the time the request names (the input field sleep_ms, or the
// request attribute sleep an embedder may set) or DefaultSleep.
func Default(patterns ...string) (*Registry, error) {
	if len(patterns) == 0 {
		patterns = []string{"*"}
	}
	r := &Registry{}
	clock := clockwork.NewRealClock()
	s := &sleepRunner{clock: clock, duration: DefaultSleep, fromRequest: true, field: DefaultSleepField, scale: 1}
	for _, p := range patterns {
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("service pattern %q: %w", p, err)
		}
		r.patterns = append(r.patterns, pattern{match: p, r: s, expect: DefaultSleep, clock: clock})
	}
	return r, nil
}

// Names returns the explicitly declared service names, sorted.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.services))
	for n := range r.services {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Patterns returns the globs (path.Match syntax) of the pattern entries, in
// the order they are tried.
func (r *Registry) Patterns() []string {
	out := make([]string, len(r.patterns))
	for i, p := range r.patterns {
		out[i] = p.match
	}
	return out
}

// Lookup returns the service declared for name: the explicit entry if there is
// one, else the first pattern that matches. A name that is not a valid
// workflow service name is never offered.
func (r *Registry) Lookup(name string) (Service, bool) {
	s, i, ok := r.find(name)
	if !ok || s != nil {
		return s, ok
	}
	p := r.patterns[i]
	return &bound{name: name, r: p.r, timeout: p.timeout, expect: p.expect, clock: p.clock, rec: r.rec,
		maxConcurrent: p.maxConcurrent, group: fmt.Sprintf("patterns[%d] %s", i, p.match)}, true
}

// find is Lookup's search: the explicit entry for name (s), or else the
// index of the first pattern that matches it.
func (r *Registry) find(name string) (s Service, pattern int, ok bool) {
	if s, ok := r.services[name]; ok {
		return s, -1, true
	}
	if checkName(name) != "" {
		return nil, -1, false
	}
	for i, p := range r.patterns {
		if ok, _ := path.Match(p.match, name); ok {
			return nil, i, true
		}
	}
	return nil, -1, false
}

// Concurrency returns a service's limit on concurrent executions from its
// declaration's max_concurrent (0: none of its own; the node's limit still
// applies) and the group that shares the limit: the service itself when
// declared by name, every name a pattern matches together for a pattern
// (one declaration, one command or endpoint to protect). Services not
// built by the parser (NewRegistry) have no limit.
func Concurrency(s Service) (group string, limit int) {
	b, ok := s.(*bound)
	if !ok || b.maxConcurrent <= 0 {
		return "", 0
	}
	if b.group != "" {
		return b.group, b.maxConcurrent
	}
	return "services." + b.name, b.maxConcurrent
}

// Offers reports whether this peer declares service name (as Lookup
// finds it, without building the service: peer choice asks on every hop).
func (r *Registry) Offers(name string) bool {
	_, _, ok := r.find(name)
	return ok
}

// keywords are the workflow language's reserved words; a service cannot be
// named after one (the grammar package owns the list).
var keywords = []string{"FORK", "SYNC", "CHOICE", "ENDCHOICE", "IF", "ELSE", "FIRST", "ENDFIRST", "FAILOVER", "ENDFAILOVER"}

// maxNameLen bounds a service name.
const maxNameLen = 256

// checkName says what is wrong with a service name, or "" when it is valid:
// letters, digits, '_', '-', '.', not a keyword.
func checkName(name string) string {
	if name == "" {
		return "empty service name"
	}
	if len(name) > maxNameLen {
		return fmt.Sprintf("service name longer than %d bytes", maxNameLen)
	}
	for _, c := range name {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-', c == '.':
		default:
			return fmt.Sprintf("service name may hold only letters, digits, '_', '-' and '.', found %q", rune(c))
		}
	}
	if slices.Contains(keywords, name) {
		return "service name is a reserved keyword of the workflow language"
	}
	return ""
}
