package pack

import (
	"encoding/json"
	"slices"
)

// Clone returns a deep copy of p: the copy shares no slices, maps or
// workflow nodes with p, so either may be changed freely. Clone of nil is
// nil.
func (p *Pack) Clone() *Pack {
	if p == nil {
		return nil
	}
	c := *p
	c.Origin = clonePeers(p.Origin)
	c.Workflow = p.Workflow.Copy()
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
