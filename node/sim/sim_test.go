package sim

import (
	"testing"
	"time"
)

// probe is a machine that records what reaches it.
type probe struct {
	booted   []any
	received []Message
	timers   []TimerKey
	synced   []LSN
}

func (p *probe) Boot(h Host, durable []any)             { p.booted = durable }
func (p *probe) Receive(h Host, from NodeID, m Message) { p.received = append(p.received, m) }
func (p *probe) Timer(h Host, key TimerKey)             { p.timers = append(p.timers, key) }
func (p *probe) Synced(h Host, lsn LSN)                 { p.synced = append(p.synced, lsn) }

type note uint64

func (n note) Digest() uint64 { return uint64(n) }

func newProbes(t *testing.T, n int, net NetConfig) (*Sim, []*probe) {
	t.Helper()
	var ps []*probe
	s := New(Config{Seed: 7, Nodes: n, Zones: 2, Net: net,
		Disk: DiskConfig{SyncMin: time.Millisecond},
		NewMachine: func(id NodeID) Machine {
			p := &probe{}
			if int(id) < len(ps) {
				ps[id] = p
			} else {
				ps = append(ps, p)
			}
			return p
		}})
	return s, ps
}

// TestKillLosesWhatWasNotSynced checks the journal's crash semantics: a
// restarted node gets back exactly what a completed Sync covered.
func TestKillLosesWhatWasNotSynced(t *testing.T) {
	s, ps := newProbes(t, 1, NetConfig{})
	h := s.Env(0)
	h.Append("a")
	h.Sync()
	s.Run(10 * time.Millisecond)
	if len(ps[0].synced) != 1 || ps[0].synced[0] != 1 {
		t.Fatalf("synced %v, want [1]", ps[0].synced)
	}
	h.Append("b") // never synced
	h.Append("c")
	h.Sync() // in flight when the node dies
	s.Kill(0)
	s.Run(20 * time.Millisecond)
	s.Restart(0)
	if got := ps[0].booted; len(got) != 1 || got[0] != "a" {
		t.Fatalf("restarted with %v, want [a]", got)
	}
}

// TestCutDropsAndTimersDieWithTheNode checks one-way cuts (at send and at
// delivery) and that a killed node's timers never fire.
func TestCutDropsAndTimersDieWithTheNode(t *testing.T) {
	s, ps := newProbes(t, 2, NetConfig{MinDelay: time.Millisecond})
	s.Env(0).Send(1, note(1))
	s.Cut(0, 1) // cut while the message is on its way
	s.Env(1).Send(0, note(2))
	s.Env(1).SetTimer(5, time.Millisecond)
	s.Kill(1)
	s.Run(time.Second)
	if len(ps[1].received) != 0 {
		t.Fatalf("node 1 got %v across a cut", ps[1].received)
	}
	if len(ps[0].received) != 1 {
		t.Fatalf("node 0 got %v, want the message sent the other way", ps[0].received)
	}
	if len(ps[1].timers) != 0 {
		t.Fatalf("a killed node's timer fired: %v", ps[1].timers)
	}
}

// TestPauseDefersEvents checks that a paused node hears nothing until it
// thaws, then everything.
func TestPauseDefersEvents(t *testing.T) {
	s, ps := newProbes(t, 2, NetConfig{MinDelay: time.Millisecond})
	s.Pause(1, 100*time.Millisecond)
	s.Env(0).Send(1, note(1))
	s.Run(50 * time.Millisecond)
	if len(ps[1].received) != 0 {
		t.Fatal("a paused node received a message")
	}
	s.Run(200 * time.Millisecond)
	if len(ps[1].received) != 1 {
		t.Fatalf("after the pause node 1 got %v, want the message", ps[1].received)
	}
}

// TestSameSeedSameHash checks that the trace hash depends on the seed's
// run only: equal for two runs of one seed, different for another seed.
func TestSameSeedSameHash(t *testing.T) {
	run := func(seed uint64) uint64 {
		s := New(Config{Seed: seed, Nodes: 3, Net: NetConfig{MeanDelay: time.Millisecond, Loss: 0.2, Dup: 0.2},
			NewMachine: func(NodeID) Machine { return &probe{} }})
		for i := range 50 {
			s.Env(NodeID(i%3)).Send(NodeID((i+1)%3), note(i))
		}
		s.Run(time.Second)
		return s.Hash()
	}
	if run(1) != run(1) {
		t.Fatal("one seed, two hashes")
	}
	if run(1) == run(2) {
		t.Fatal("two seeds, one hash: the seed does not reach the network")
	}
}
