package grammar

// Limits bounds what the parser and the static checks accept, so that a
// hostile or broken workflow cannot exhaust a small node. A zero field means
// "use the value from DefaultLimits"; a negative field means "no limit".
type Limits struct {
	// MaxDepth is the deepest nesting of patterns (FORK, CHOICE, FIRST,
	// FAILOVER) inside one another; a plain sequence has depth 0. It also
	// bounds the parser's recursion.
	MaxDepth int
	// MaxArms is the most branches or arms one pattern may have.
	MaxArms int
	// MaxNameLen is the longest service name or output label, in bytes.
	MaxNameLen int
	// MaxInputBytes is the largest source text Parse accepts, in bytes.
	MaxInputBytes int
	// MaxServices is the most service calls a workflow may contain.
	MaxServices int
}

// DefaultLimits returns limits that fit real scientific workflows (a
// 10,000-job Montage run parses comfortably) while keeping a single parse
// within a few megabytes on a Raspberry Pi.
func DefaultLimits() Limits {
	return Limits{
		MaxDepth:      64,
		MaxArms:       256,
		MaxNameLen:    128,
		MaxInputBytes: 4 << 20,
		MaxServices:   100000,
	}
}

// resolved fills zero fields from DefaultLimits.
func (l Limits) resolved() Limits {
	d := DefaultLimits()
	pick := func(v, def int) int {
		if v == 0 {
			return def
		}
		return v
	}
	return Limits{
		MaxDepth:      pick(l.MaxDepth, d.MaxDepth),
		MaxArms:       pick(l.MaxArms, d.MaxArms),
		MaxNameLen:    pick(l.MaxNameLen, d.MaxNameLen),
		MaxInputBytes: pick(l.MaxInputBytes, d.MaxInputBytes),
		MaxServices:   pick(l.MaxServices, d.MaxServices),
	}
}

// exceeds reports whether v is beyond limit (a negative limit never is).
func exceeds(v, limit int) bool { return limit >= 0 && v > limit }
