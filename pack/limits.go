package pack

// Limits bounds what a peer accepts in a pack. Decode enforces them on every
// pack that arrives from the network, and Validate on packs built locally. A
// zero field means "use the DefaultLimits value", so Limits{} is the default.
type Limits struct {
	// MaxBytes bounds the encoded size of a pack, header included. It is
	// checked before any decoding, so it also bounds decoder memory.
	MaxBytes int
	// MaxDepth bounds how deeply patterns (FORK, CHOICE, FIRST, FAILOVER)
	// nest inside each other; a flat sequence has depth 0.
	MaxDepth int
	// MaxBranches bounds the branches of one pattern and the arms of one
	// CHOICE.
	MaxBranches int
	// MaxHops bounds how many hand-offs a pack may have made.
	MaxHops int
	// MaxDataBytes bounds the workflow input plus every output (labels and
	// JSON values together).
	MaxDataBytes int
	// MaxFrames bounds the join frame stack.
	MaxFrames int
	// MaxTrace bounds the number of trace entries.
	MaxTrace int
	// MaxServices bounds the number of service calls in the residual
	// workflow, counted over every branch and arm.
	MaxServices int
}

// DefaultLimits returns the limits a bedwe node uses unless configured
// otherwise: generous for real workflows (a 1,000-service Montage run fits
// with room to spare), small enough that a hostile pack cannot exhaust a
// Raspberry Pi.
func DefaultLimits() Limits {
	return Limits{
		MaxBytes:     16 << 20,
		MaxDepth:     64,
		MaxBranches:  256,
		MaxHops:      10_000,
		MaxDataBytes: 8 << 20,
		MaxFrames:    64,
		MaxTrace:     100_000,
		MaxServices:  100_000,
	}
}

// Fixed bounds on individual fields. They are not configurable because no
// honest pack comes near them and peers must agree on them.
const (
	// MaxNameLen bounds service names, output labels, attribute keys and
	// values (but reads lists: grammar.MaxReadsLen), zones and outcomes, in
	// bytes.
	MaxNameLen = 256
	// MaxIDLen bounds workflow IDs, join IDs and peer IDs, in bytes.
	MaxIDLen = 128
	// MaxPathLen bounds step paths, in bytes.
	MaxPathLen = 1024
	// MaxGuardLen bounds the source text of a CHOICE guard, in bytes.
	MaxGuardLen = 4096
	// MaxNoteLen bounds a trace entry's note, in bytes.
	MaxNoteLen = 4096
	// MaxPeers bounds the holders of one frame, the origin list and the
	// addresses of one peer.
	MaxPeers = 32
	// MaxAddrLen bounds one multiaddr, in bytes.
	MaxAddrLen = 512
)

// withDefaults fills every zero field from DefaultLimits.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	fill := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	fill(&l.MaxBytes, d.MaxBytes)
	fill(&l.MaxDepth, d.MaxDepth)
	fill(&l.MaxBranches, d.MaxBranches)
	fill(&l.MaxHops, d.MaxHops)
	fill(&l.MaxDataBytes, d.MaxDataBytes)
	fill(&l.MaxFrames, d.MaxFrames)
	fill(&l.MaxTrace, d.MaxTrace)
	fill(&l.MaxServices, d.MaxServices)
	return l
}
