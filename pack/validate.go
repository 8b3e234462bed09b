package pack

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/bedwe/bedwe/grammar"
)

// ErrInvalid matches (errors.Is) every *ValidationError.
var ErrInvalid = errors.New("invalid pack")

// ValidationError reports the first part of a pack that breaks a rule or
// exceeds a limit.
type ValidationError struct {
	// Field locates the offending part, for example "hops",
	// "workflow[2].branches[0][1].name" or `outputs["tiles"]`.
	Field string
	// Limit names the Limits field or the constant that was exceeded
	// ("MaxBranches", "MaxNameLen"), or is empty when a rule was broken.
	Limit string
	// Reason says what is wrong, with the limit's value when one applies.
	Reason string
}

// Error renders the error as "invalid pack: FIELD: REASON".
func (e *ValidationError) Error() string {
	return "invalid pack: " + e.Field + ": " + e.Reason
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// Validate checks p against the wire rules and lim (zero fields of lim take
// their DefaultLimits value): the checks Decode applies to every pack it
// accepts. Call it before handing a pack to a peer to learn whether the peer
// will take it. The error is a *ValidationError naming the first offending
// field.
func (p *Pack) Validate(lim Limits) error {
	if p == nil {
		return &ValidationError{Field: "pack", Reason: "nil pack"}
	}
	v := &validator{lim: lim.withDefaults()}
	return v.pack(p)
}

type validator struct {
	lim      Limits
	services int
	// loc is the location inside the workflow tree, rendered only on error.
	loc []seg
}

// seg is one step of a location: prefix followed by "[idx]".
type seg struct {
	prefix string
	idx    int
}

func (v *validator) here(suffix string) string {
	var b strings.Builder
	b.WriteString("workflow")
	for _, s := range v.loc {
		b.WriteString(s.prefix)
		b.WriteByte('[')
		b.WriteString(strconv.Itoa(s.idx))
		b.WriteByte(']')
	}
	b.WriteString(suffix)
	return b.String()
}

func (v *validator) failAt(suffix, limit, format string, args ...any) error {
	return &ValidationError{Field: v.here(suffix), Limit: limit, Reason: fmt.Sprintf(format, args...)}
}

func fail(field, limit, format string, args ...any) error {
	return &ValidationError{Field: field, Limit: limit, Reason: fmt.Sprintf(format, args...)}
}

func (v *validator) pack(p *Pack) error {
	lim := v.lim
	if err := checkID("workflow_id", p.WorkflowID); err != nil {
		return err
	}
	if err := checkPeers("origin", p.Origin, true); err != nil {
		return err
	}
	if err := v.workflowRoot(p.Workflow); err != nil {
		return err
	}
	if err := checkData(p, lim); err != nil {
		return err
	}
	if len(p.Frames) > lim.MaxFrames {
		return fail("frames", "MaxFrames", "%d frames, over MaxFrames=%d", len(p.Frames), lim.MaxFrames)
	}
	for i, f := range p.Frames {
		if err := checkFrame("frames["+strconv.Itoa(i)+"]", f, lim); err != nil {
			return err
		}
	}
	if p.Attempt < 0 {
		return fail("attempt", "", "negative attempt %d", p.Attempt)
	}
	if p.Hops < 0 {
		return fail("hops", "", "negative hop count %d", p.Hops)
	}
	if p.Hops > lim.MaxHops {
		return fail("hops", "MaxHops", "%d hops, over MaxHops=%d", p.Hops, lim.MaxHops)
	}
	if !peerIsZero(p.Sender) {
		if err := checkPeer("sender", p.Sender); err != nil {
			return err
		}
	}
	if err := checkTrace(p.Trace, lim); err != nil {
		return err
	}
	if len(p.Settle) > MaxPeers {
		return fail("settle", "", "%d settle items, over %d", len(p.Settle), MaxPeers)
	}
	for i, s := range p.Settle {
		where := "settle[" + strconv.Itoa(i) + "]"
		if s.Kind < SettleGuard || s.Kind > SettleRerouted {
			return fail(where, "", "unknown settle kind %d", s.Kind)
		}
		if s.Key == "" || len(s.Key) > 8*MaxIDLen {
			return fail(where, "", "settle key must be 1 to %d bytes", 8*MaxIDLen)
		}
		if s.Attempt < 0 || s.Branch < 0 {
			return fail(where, "", "negative attempt or branch")
		}
		if len(s.Peers) > MaxPeers {
			return fail(where, "", "%d peers, over %d", len(s.Peers), MaxPeers)
		}
		for j, pr := range s.Peers {
			if err := checkPeer(where+".peers["+strconv.Itoa(j)+"]", pr); err != nil {
				return err
			}
		}
	}
	if _, err := timeToWire(p.Deadline); err != nil {
		return fail("deadline", "", "%v", err)
	}
	return nil
}

func (v *validator) workflowRoot(w *grammar.Workflow) error {
	if w == nil || len(w.Steps) == 0 {
		return fail("workflow", "", "empty workflow (a pack carries at least the service to run)")
	}
	// Any step may lead: packs journaled or replicated between hops (the
	// origin's first pack, a join's continuation) can start with a pattern.
	// The hand-off handler itself insists on a leading service.
	return v.steps(w, 0)
}

// steps checks a non-root workflow whose patterns sit at nesting depth.
func (v *validator) steps(w *grammar.Workflow, depth int) error {
	if w == nil || len(w.Steps) == 0 {
		return v.failAt("", "", "empty branch")
	}
	for i, s := range w.Steps {
		v.loc = append(v.loc, seg{idx: i})
		if err := v.step(s, depth); err != nil {
			return err
		}
		v.loc = v.loc[:len(v.loc)-1]
	}
	return nil
}

func (v *validator) step(s grammar.Step, depth int) error {
	switch s := s.(type) {
	case *grammar.Service:
		if s == nil {
			return v.failAt("", "", "nil service")
		}
		return v.service(s)
	case *grammar.Fork:
		if s == nil {
			return v.failAt("", "", "nil FORK")
		}
		return v.branches("FORK", s.Branches, depth)
	case *grammar.First:
		if s == nil {
			return v.failAt("", "", "nil FIRST")
		}
		return v.branches("FIRST", s.Branches, depth)
	case *grammar.Failover:
		if s == nil {
			return v.failAt("", "", "nil FAILOVER")
		}
		return v.branches("FAILOVER", s.Branches, depth)
	case *grammar.Choice:
		if s == nil {
			return v.failAt("", "", "nil CHOICE")
		}
		return v.choice(s, depth)
	case nil:
		return v.failAt("", "", "nil step")
	default:
		return v.failAt("", "", "unknown step type %T", s)
	}
}

func (v *validator) service(s *grammar.Service) error {
	v.services++
	if v.services > v.lim.MaxServices {
		return v.failAt("", "MaxServices", "more than MaxServices=%d services in the workflow", v.lim.MaxServices)
	}
	if r, l := checkName(s.Name); r != "" {
		return v.failAt(".name", l, "service name %s", r)
	}
	for i, a := range s.Attrs {
		if r, l := checkName(a.Key); r != "" {
			return v.failAt(".attrs["+strconv.Itoa(i)+"].key", l, "attribute key %s", r)
		}
		maxLen, limit := MaxNameLen, "MaxNameLen"
		if a.Key == grammar.AttrReads {
			maxLen, limit = grammar.MaxReadsLen, "grammar.MaxReadsLen"
		}
		if r, l := checkText(a.Value, maxLen, limit, true); r != "" {
			return v.failAt(".attrs["+strconv.Itoa(i)+"].value", l, "attribute %s value %s", a.Key, r)
		}
	}
	if r, l := checkText(s.Path, MaxPathLen, "MaxPathLen", false); r != "" {
		return v.failAt(".path", l, "service %s path %s (paths come from grammar.AssignPaths)", s.Name, r)
	}
	return nil
}

func (v *validator) pattern(kind string, n, depth int) error {
	if depth+1 > v.lim.MaxDepth {
		return v.failAt("", "MaxDepth", "%s nested %d deep, over MaxDepth=%d", kind, depth+1, v.lim.MaxDepth)
	}
	if n < 2 {
		return v.failAt("", "", "%s has %d branches, needs at least 2", kind, n)
	}
	if n > v.lim.MaxBranches {
		return v.failAt("", "MaxBranches", "%s has %d branches, over MaxBranches=%d", kind, n, v.lim.MaxBranches)
	}
	return nil
}

func (v *validator) branches(kind string, bs []*grammar.Workflow, depth int) error {
	if err := v.pattern(kind, len(bs), depth); err != nil {
		return err
	}
	for j, b := range bs {
		v.loc = append(v.loc, seg{prefix: ".branches", idx: j})
		if err := v.steps(b, depth+1); err != nil {
			return err
		}
		v.loc = v.loc[:len(v.loc)-1]
	}
	return nil
}

func (v *validator) choice(c *grammar.Choice, depth int) error {
	if err := v.pattern("CHOICE", len(c.Arms), depth); err != nil {
		return err
	}
	for j, a := range c.Arms {
		v.loc = append(v.loc, seg{prefix: ".arms", idx: j})
		if a == nil {
			return v.failAt("", "", "nil arm")
		}
		switch a.Kind {
		case grammar.ArmIf:
			if a.Guard == "" {
				return v.failAt(".guard", "", "IF arm without a guard")
			}
			if r, l := checkText(a.Guard, MaxGuardLen, "MaxGuardLen", false); r != "" {
				return v.failAt(".guard", l, "guard %s", r)
			}
		case grammar.ArmPlain, grammar.ArmElse:
			if a.Guard != "" {
				return v.failAt(".guard", "", "guard on an arm of kind %d (only IF arms have guards)", a.Kind)
			}
		default:
			return v.failAt(".kind", "", "unknown arm kind %d", a.Kind)
		}
		if err := v.steps(a.Body, depth+1); err != nil {
			return err
		}
		v.loc = v.loc[:len(v.loc)-1]
	}
	return nil
}

// checkData bounds the input and outputs and checks they are JSON, every
// output a JSON object.
func checkData(p *Pack, lim Limits) error {
	total := len(p.Input)
	for k, o := range p.Outputs {
		total += len(k) + len(o)
	}
	if total > lim.MaxDataBytes {
		return fail("outputs", "MaxDataBytes", "input and outputs hold %d bytes, over MaxDataBytes=%d", total, lim.MaxDataBytes)
	}
	if len(p.Input) > 0 && !json.Valid(p.Input) {
		return fail("input", "", "not valid JSON")
	}
	// Report the smallest bad label so the error does not depend on map
	// iteration order.
	var (
		bad    *ValidationError
		badKey string
	)
	for k, o := range p.Outputs {
		if bad != nil && k >= badKey {
			continue
		}
		field := "outputs[" + strconv.Quote(k) + "]"
		if r, l := checkName(k); r != "" {
			bad, badKey = &ValidationError{Field: field, Limit: l, Reason: "output label " + r}, k
		} else if t := bytes.TrimLeft(o, " \t\r\n"); len(t) == 0 || t[0] != '{' || !json.Valid(o) {
			bad, badKey = &ValidationError{Field: field, Reason: "not a JSON object"}, k
		}
	}
	if bad != nil {
		return bad
	}
	return nil
}

func checkFrame(field string, f Frame, lim Limits) error {
	if err := checkID(field+".join_id", f.JoinID); err != nil {
		return err
	}
	switch f.Kind {
	case FrameFork, FrameFirst, FrameFailover:
	default:
		return fail(field+".kind", "", "unknown frame kind %d", f.Kind)
	}
	if f.Branch < 0 || f.Branch >= lim.MaxBranches {
		return fail(field+".branch", "MaxBranches", "branch index %d outside [0, MaxBranches=%d)", f.Branch, lim.MaxBranches)
	}
	return checkPeers(field+".holders", f.Holders, true)
}

func checkPeers(field string, ps []Peer, required bool) error {
	if required && len(ps) == 0 {
		return fail(field, "", "no peers (at least one is required)")
	}
	if len(ps) > MaxPeers {
		return fail(field, "MaxPeers", "%d peers, over MaxPeers=%d", len(ps), MaxPeers)
	}
	for i, p := range ps {
		if err := checkPeer(field+"["+strconv.Itoa(i)+"]", p); err != nil {
			return err
		}
	}
	return nil
}

func checkPeer(field string, p Peer) error {
	if err := checkID(field+".id", p.ID); err != nil {
		return err
	}
	if len(p.Addrs) > MaxPeers {
		return fail(field+".addrs", "MaxPeers", "%d addresses, over MaxPeers=%d", len(p.Addrs), MaxPeers)
	}
	for i, a := range p.Addrs {
		if r, l := checkText(a, MaxAddrLen, "MaxAddrLen", false); r != "" {
			return fail(field+".addrs["+strconv.Itoa(i)+"]", l, "address %s", r)
		}
	}
	if r, l := checkText(p.Zone, MaxNameLen, "MaxNameLen", true); r != "" {
		return fail(field+".zone", l, "zone %s", r)
	}
	return nil
}

func checkTrace(tr []TraceEntry, lim Limits) error {
	if len(tr) > lim.MaxTrace {
		return fail("trace", "MaxTrace", "%d entries, over MaxTrace=%d", len(tr), lim.MaxTrace)
	}
	for i, e := range tr {
		field := "trace[" + strconv.Itoa(i) + "]"
		for _, c := range []struct {
			name, val, limit string
			max              int
		}{
			{"path", e.Path, "MaxPathLen", MaxPathLen},
			{"service", e.Service, "MaxNameLen", MaxNameLen},
			{"peer", e.Peer, "MaxIDLen", MaxIDLen},
			{"zone", e.Zone, "MaxNameLen", MaxNameLen},
			{"outcome", string(e.Outcome), "MaxNameLen", MaxNameLen},
			{"note", e.Note, "MaxNoteLen", MaxNoteLen},
			{"label", e.Label, "MaxNameLen", MaxNameLen},
			{"stash", e.Stash, "MaxIDLen", MaxIDLen},
		} {
			if r, l := checkText(c.val, c.max, c.limit, true); r != "" {
				return fail(field+"."+c.name, l, "%s %s", c.name, r)
			}
		}
		if e.Attempt < 0 {
			return fail(field+".attempt", "", "negative attempt %d", e.Attempt)
		}
		if _, err := timeToWire(e.Start); err != nil {
			return fail(field+".start", "", "%v", err)
		}
		if _, err := timeToWire(e.End); err != nil {
			return fail(field+".end", "", "%v", err)
		}
	}
	return nil
}

// checkID checks a workflow, join or peer ID: non-empty, at most MaxIDLen
// bytes of letters, digits, '_', '-' and '.'. IDs appear in journal keys
// and log lines, so they never hold '/' or spaces.
func checkID(field, id string) error {
	if id == "" {
		return fail(field, "", "empty")
	}
	if len(id) > MaxIDLen {
		return fail(field, "MaxIDLen", "%d bytes, over MaxIDLen=%d", len(id), MaxIDLen)
	}
	if i := badNameByte(id); i >= 0 {
		return fail(field, "", "character %q at byte %d is not allowed (letters, digits, '_', '-', '.')", rune(id[i]), i)
	}
	return nil
}

// The check helpers below return a reason ("" when fine) and, when the
// reason is an exceeded limit, the limit's name.

func overLimit(limit string, n, max int) (string, string) {
	return fmt.Sprintf("is %d bytes, over %s=%d", n, limit, max), limit
}

// checkName checks a service name, output label or attribute key: the
// grammar's NAME (letters, digits, '_', '-', '.'), at most MaxNameLen bytes.
func checkName(s string) (reason, limit string) {
	if s == "" {
		return "is empty", ""
	}
	if len(s) > MaxNameLen {
		return overLimit("MaxNameLen", len(s), MaxNameLen)
	}
	if !utf8.ValidString(s) {
		return "is not valid UTF-8", ""
	}
	if i := badNameByte(s); i >= 0 {
		r, _ := utf8.DecodeRuneInString(s[i:])
		return fmt.Sprintf("%q has %q at byte %d (allowed: letters, digits, '_', '-', '.')", s, r, i), ""
	}
	return "", ""
}

// badNameByte returns the byte offset of the first rune that may not appear
// in a NAME, or -1.
func badNameByte(s string) int {
	for i, r := range s {
		if r == '_' || r == '-' || r == '.' || unicode.IsLetter(r) || unicode.IsDigit(r) {
			continue
		}
		return i
	}
	return -1
}

// checkText checks free text: valid UTF-8, no control characters other
// than tab and newline, at most max bytes, non-empty unless allowEmpty.
func checkText(s string, max int, limit string, allowEmpty bool) (reason, lim string) {
	if s == "" {
		if allowEmpty {
			return "", ""
		}
		return "is empty", ""
	}
	if len(s) > max {
		return overLimit(limit, len(s), max)
	}
	if !utf8.ValidString(s) {
		return "is not valid UTF-8", ""
	}
	for i, r := range s {
		if (r < 0x20 && r != '\t' && r != '\n' && r != '\r') || r == 0x7f {
			return fmt.Sprintf("has control character %q at byte %d", r, i), ""
		}
	}
	return "", ""
}
