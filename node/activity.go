package node

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"sort"
	"time"

	"github.com/bedwe/bedwe/internal/atomicfile"
	"github.com/bedwe/bedwe/node/held"
	"github.com/bedwe/bedwe/node/join"
	"github.com/bedwe/bedwe/node/origin"
)

// Activity is what DATA/activity.json says a peer is doing: the work it
// holds (with the peer that handed it over), the joins it holds and the
// workflows it is origin of. Operators read it to see what a board is busy
// with; testnets read it to aim their chaos.
type Activity struct {
	Updated time.Time `json:"updated"`
	// Draining says the peer hands off its work before a power cut.
	Draining bool           `json:"draining"`
	Held     []ActivityHeld `json:"held"`
	Joins    []string       `json:"joins"`
	// JoinInfo describes each join in Joins: its workflow and the peers
	// holding its replicas.
	JoinInfo []ActivityJoin `json:"join_info"`
	Origins  []string       `json:"origins"`
}

// ActivityHeld is one held pack.
type ActivityHeld struct {
	Workflow string `json:"workflow"`
	Step     string `json:"step"`
	Path     string `json:"path"`
	Attempt  int    `json:"attempt"`
	Sender   string `json:"sender,omitempty"`
}

// ActivityJoin is one join a peer acts for.
type ActivityJoin struct {
	ID       string   `json:"id"`
	Workflow string   `json:"workflow"`
	Replicas []string `json:"replicas,omitempty"`
}

func (n *Node) activity() Activity {
	a := Activity{Updated: n.clock.Now().UTC(), Draining: n.draining.Load(), Held: []ActivityHeld{}, Joins: []string{}, JoinInfo: []ActivityJoin{}, Origins: []string{}}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, s := range n.helds.all() {
		m := s.view()
		if m.Phase() < held.PhaseRunning || m.Phase().Ended() {
			continue
		}
		st := m.Record()
		if st.DispatchOnly || st.Pack == nil || len(st.Pack.Workflow.Steps) == 0 {
			continue
		}
		head, err := st.Pack.Head()
		if err != nil {
			continue
		}
		a.Held = append(a.Held, ActivityHeld{Workflow: st.Pack.WorkflowID, Step: head.Name, Path: head.Path, Attempt: st.Pack.Attempt, Sender: st.Pack.Sender.ID})
	}
	for _, c := range n.joins.all() {
		c.view(func(m *join.Join) {
			if m.Pending() {
				a.Joins = append(a.Joins, m.ID())
				info := ActivityJoin{ID: m.ID(), Workflow: m.WorkflowID()}
				for _, r := range m.Replicas() {
					info.Replicas = append(info.Replicas, r.ID)
				}
				a.JoinInfo = append(a.JoinInfo, info)
			}
		})
	}
	for _, w := range n.origins.all() {
		if w.Role() == origin.RolePrimary && w.Running() {
			a.Origins = append(a.Origins, w.ID())
		}
	}
	sort.Slice(a.Held, func(i, j int) bool { return a.Held[i].Path < a.Held[j].Path })
	sort.Strings(a.Joins)
	sort.Slice(a.JoinInfo, func(i, j int) bool { return a.JoinInfo[i].ID < a.JoinInfo[j].ID })
	sort.Strings(a.Origins)
	return a
}

// activityLoop writes activity.json at start and then whenever what it
// says changes (checked when held work changes, at most every 50 ms, and
// once a second while the node holds work, pending joins or running
// workflows). An idle
// board writes nothing: rewriting and fsyncing the file every second would
// wear its SD card (docs/operations.md). Nor does it wake: with nothing
// held, only a touch (touchActivity: work added, a drain) can change what
// the file says, so the loop waits for one (a wake-up costs idle CPU).
func (n *Node) activityLoop(ctx context.Context) {
	tick := n.clock.NewTicker(time.Second)
	defer tick.Stop()
	path := filepath.Join(n.cfg.DataDir, "activity.json")
	var last []byte
	empty := false
	for first := true; ; first = false {
		if !first {
			ticks := tick.Chan()
			if empty {
				ticks = nil
			}
			select {
			case <-ctx.Done():
				return
			case <-ticks:
			case <-n.activityChanged:
				n.clock.Sleep(50 * time.Millisecond) // coalesce bursts
			}
		}
		n.activityPasses.Add(1)
		a := n.activity()
		// Held work is counted before activity's filter: a step taken
		// but not yet running changes phase without a touch.
		empty = n.helds.len() == 0 && len(a.Joins) == 0 && len(a.Origins) == 0
		updated := a.Updated
		a.Updated = time.Time{}
		same, _ := json.Marshal(a)
		if bytes.Equal(same, last) {
			continue
		}
		last = same
		a.Updated = updated
		data, _ := json.MarshalIndent(a, "", "  ")
		if err := atomicfile.Write(path, data, 0o644); err != nil && ctx.Err() == nil {
			n.log.Debug("write activity.json", "err", err)
		}
	}
}

func (n *Node) touchActivity() {
	select {
	case n.activityChanged <- struct{}{}:
	default:
	}
}
