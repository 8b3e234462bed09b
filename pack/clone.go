package pack

import (
	"encoding/json"
	"slices"

	"github.com/bedwe/bedwe/grammar"
)

// Clone returns a copy of p that shares no slices or maps with p, so
// either's fields may be changed freely. The residual workflow's step list
// is copied, its steps are shared: they are never changed once built (a decoded or parsed workflow
// is only read, and peeling or advancing a residual builds new
// grammar.Workflow values around the same steps, as grammar.Peel does), and
// copying them made Clone cost as much as the residual is long, on every
// hop. Replace c.Workflow rather than change its steps. Clone of nil is
// nil.
func (p *Pack) Clone() *Pack {
	if p == nil {
		return nil
	}
	c := *p
	c.Origin = clonePeers(p.Origin)
	if p.Workflow != nil {
		c.Workflow = &grammar.Workflow{Steps: slices.Clone(p.Workflow.Steps)}
	}
	c.Input = slices.Clone(p.Input)
	if p.Outputs != nil {
		c.Outputs = make(map[string]json.RawMessage, len(p.Outputs))
		for k, v := range p.Outputs {
			c.Outputs[k] = slices.Clone(v)
		}
	}
	if p.Frames != nil {
		c.Frames = make([]Frame, len(p.Frames))
		for i, f := range p.Frames {
			f.Holders = clonePeers(f.Holders)
			c.Frames[i] = f
		}
	}
	c.Sender = clonePeer(p.Sender)
	c.Trace = slices.Clone(p.Trace)
	if p.Settle != nil {
		c.Settle = make([]Settle, len(p.Settle))
		for i, s := range p.Settle {
			s.Peers = clonePeers(s.Peers)
			c.Settle[i] = s
		}
	}
	return &c
}

func clonePeer(p Peer) Peer {
	p.Addrs = slices.Clone(p.Addrs)
	return p
}

func clonePeers(ps []Peer) []Peer {
	if ps == nil {
		return nil
	}
	out := make([]Peer, len(ps))
	for i, p := range ps {
		out[i] = clonePeer(p)
	}
	return out
}
