package testnet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bedwe/bedwe/schedule"
)

// Kinds of TimetableEvent.
const (
	EventKill    = "kill"
	EventRestart = "restart"
)

// TimetableEvent is one thing Follow did to a zone: SIGKILL every process
// of the zone at its cut, or restart them at its restore.
type TimetableEvent struct {
	// Kind is EventKill or EventRestart.
	Kind string `json:"kind"`
	// Zone is the zone acted on.
	Zone string `json:"zone"`
	// Nodes are the indexes of the nodes killed or restarted, PIDs their
	// process IDs (the killed ones, or the new ones after a restart), and
	// Addrs their first address after a restart (with /p2p/ID).
	Nodes []int    `json:"nodes"`
	PIDs  []int    `json:"pids"`
	Addrs []string `json:"addrs,omitempty"`
	// Scheduled is the timetable instant of the cut or restore (virtual
	// time), ScheduledReal the real instant the clock reads it.
	Scheduled     time.Time `json:"scheduled"`
	ScheduledReal time.Time `json:"scheduled_real"`
	// Real is when Follow acted (signals sent, restarts begun), Virtual the
	// clock's reading then, and Done when the last process was gone or had
	// written its node.json.
	Real    time.Time `json:"real"`
	Virtual time.Time `json:"virtual"`
	Done    time.Time `json:"done"`
	// LagMs is Real - ScheduledReal in milliseconds: how late Follow acted
	// (at the start, a zone already dark is killed at once, with Scheduled
	// the current virtual time).
	LagMs int64 `json:"lag_ms"`
	// Error is set when a kill or a restart failed for some node.
	Error string `json:"error,omitempty"`
}

// FollowReport is what Follow did.
type FollowReport struct {
	// Clock is the virtual clock followed (START@EPOCHxSPEED, empty for
	// real time).
	Clock string `json:"clock,omitempty"`
	// From and To bound the run in real time, VirtualFrom and VirtualTo in
	// timetable time.
	From        time.Time `json:"from"`
	To          time.Time `json:"to"`
	VirtualFrom time.Time `json:"virtual_from"`
	VirtualTo   time.Time `json:"virtual_to"`
	// Kills and Restarts count processes killed and restarted.
	Kills    int              `json:"kills"`
	Restarts int              `json:"restarts"`
	Events   []TimetableEvent `json:"events"`
	// Errors counts events with an Error.
	Errors int `json:"errors"`
	// LagMsMax is the largest LagMs of any scheduled event.
	LagMsMax int64 `json:"lag_ms_max"`
}

// FollowOptions configure Follow.
type FollowOptions struct {
	// Schedule is the timetable to follow; nil: the testnet's own.
	Schedule *schedule.Schedule
	// Clock maps real time onto timetable time; the zero clock with a nil
	// Schedule means the testnet's own clock (zero: real time).
	Clock schedule.VirtualClock
	// Progress, when set, receives one line per kill and restart.
	Progress io.Writer
	// OnEvent, when set, is called after every kill and restart, from the
	// goroutine running Follow: it must return quickly.
	OnEvent func(TimetableEvent)
	// Restore restarts the zones Follow left dark when ctx ends, so the
	// testnet is whole again.
	Restore bool
}

// lookahead is how far ahead (in timetable time) Follow asks the timetable
// for the next dark window at once; with none in it, it asks again then.
const lookahead = 8 * 24 * time.Hour

// retryAfter is how soon (real time) Follow tries again to restart a zone
// whose restart failed; it doubles with every failure in a row, up to 32×.
const retryAfter = time.Second

// transitionBack is how far back (timetable time) Follow looks for the
// window whose start or end it is acting on.
const transitionBack = 48 * time.Hour

// FollowTimetable plays sched on the testnet on clock until ctx ends: at
// every zone's cut it SIGKILLs every process of the zone, and at its
// restore it restarts them with their data directories (Restart). Zones
// dark when it starts are killed at once. When ctx ends, the zones it left
// dark are restarted. It waits on real timers set at clock.RealAt(t) for
// the timetable's transitions, so it costs nothing in between. Zones of the
// testnet the timetable lacks are left alone; a timetable state of Unknown
// counts as powered.
func (m *Manifest) FollowTimetable(ctx context.Context, sched *schedule.Schedule, clock schedule.VirtualClock, progress io.Writer) (*FollowReport, error) {
	return m.Follow(ctx, FollowOptions{Schedule: sched, Clock: clock, Progress: progress, Restore: true})
}

// Follow is FollowTimetable with options. It returns the report when ctx
// ends (a cancelled ctx is not an error); failed kills and restarts are
// recorded in their events, and the zone is tried again at its next
// transition.
func (m *Manifest) Follow(ctx context.Context, opts FollowOptions) (*FollowReport, error) {
	sched, clock := opts.Schedule, opts.Clock
	if sched == nil {
		s, err := m.LoadSchedule()
		if err != nil {
			return nil, err
		}
		sched = s
		if clock.IsZero() {
			c, err := m.VirtualClock()
			if err != nil {
				return nil, err
			}
			clock = c
		}
	}
	if err := clock.Validate(); err != nil {
		return nil, err
	}
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	f := &follower{m: m, sched: sched, clock: clock, progress: progress, onEvent: opts.OnEvent, dark: map[string]bool{}, failed: map[string]bool{}, retries: map[string]int{}}
	for _, z := range m.Zones {
		if _, err := sched.StateAt(z, clock.Now()); err == nil {
			f.zones = append(f.zones, z)
		} else {
			fmt.Fprintf(progress, "timetable: zone %s is not in the timetable; it stays powered\n", z)
		}
	}
	if len(f.zones) == 0 {
		return nil, errors.New("follow timetable: none of the testnet's zones is in the timetable")
	}
	rep := &FollowReport{Clock: clock.String(), From: time.Now(), VirtualFrom: clock.Now(), Events: []TimetableEvent{}}
	f.rep = rep
	f.run(ctx)
	if opts.Restore {
		// ctx has ended: restarts get their own deadline.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		for _, z := range f.zones {
			if f.dark[z] || f.failed[z] {
				f.restart(rctx, z, clock.Now())
			}
		}
		cancel()
	}
	rep.To, rep.VirtualTo = time.Now(), clock.Now()
	return rep, nil
}

type follower struct {
	m        *Manifest
	sched    *schedule.Schedule
	clock    schedule.VirtualClock
	progress io.Writer
	onEvent  func(TimetableEvent)
	zones    []string
	// dark says which zones Follow killed and has not restarted; failed
	// which zones' last restart failed for some node (tried again soon).
	dark    map[string]bool
	failed  map[string]bool
	retries map[string]int
	rep     *FollowReport
}

// run applies the timetable's state at the current instant, then sleeps on
// a real timer until the next transition of any zone, until ctx ends.
func (f *follower) run(ctx context.Context) {
	var at time.Time // the transition instant the last timer was set for
	first := true
	for ctx.Err() == nil {
		now := f.clock.Now()
		if now.Before(at) {
			// Rounding between real and virtual time: the timer fired for at.
			now = at
		}
		// Kills first: they take milliseconds, restarts take a while, and
		// one zone's cut often falls on another's restore.
		for _, z := range f.zones {
			if f.darkAt(z, now) && !f.dark[z] {
				f.kill(z, f.transition(z, now, true, first))
			}
		}
		for _, z := range f.zones {
			if ctx.Err() != nil {
				break
			}
			switch {
			case f.darkAt(z, now):
			case f.dark[z]:
				f.restart(ctx, z, f.transition(z, now, false, first))
			case f.failed[z]:
				f.restart(ctx, z, now)
			}
		}
		first = false
		next, ok := f.next(now)
		if !ok {
			<-ctx.Done()
			return
		}
		at = next
		timer := time.NewTimer(time.Until(f.clock.RealAt(next)))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}

// darkAt reports whether the timetable has zone dark at t.
func (f *follower) darkAt(zone string, t time.Time) bool {
	st, err := f.sched.StateAt(zone, t)
	return err == nil && st == schedule.Dark
}

// transition is the timetable instant of the cut (dark) or restore that
// happened at or just before now: the start or the end of the window. At
// the first look a zone already dark is acted on now.
func (f *follower) transition(zone string, now time.Time, dark, first bool) time.Time {
	if first {
		return now
	}
	if dark {
		// The window under way started a moment ago.
		if ws := f.sched.Windows(zone, now.Add(-transitionBack), now.Add(time.Nanosecond)); len(ws) > 0 {
			if w := ws[len(ws)-1]; !w.Start.After(now) {
				return w.Start
			}
		}
		return now
	}
	if ws := f.sched.Windows(zone, now.Add(-transitionBack), now); len(ws) > 0 {
		return ws[len(ws)-1].End
	}
	return now
}

// next is the earliest transition after now of any zone: the end of the
// dark window of a zone Follow holds dark, the start of the next window of
// the others. It also stops at the look-ahead's end and at known_until.
func (f *follower) next(now time.Time) (time.Time, bool) {
	var best time.Time
	consider := func(t time.Time) {
		if t.After(now) && (best.IsZero() || t.Before(best)) {
			best = t
		}
	}
	horizon := now.Add(lookahead)
	for _, z := range f.zones {
		if f.failed[z] {
			backoff := retryAfter << min(f.retries[z]-1, 5)
			consider(now.Add(f.clock.Virtual(backoff)))
		}
		ws := f.sched.Windows(z, now, horizon)
		for _, w := range ws {
			if f.dark[z] && !w.Start.After(now) {
				consider(w.End)
				break
			}
			if w.Start.After(now) {
				consider(w.Start)
				break
			}
		}
	}
	if !now.Before(f.sched.KnownUntil) {
		return best, !best.IsZero()
	}
	consider(minTime(horizon, f.sched.KnownUntil))
	return best, !best.IsZero()
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// zoneNodes lists the indexes of the zone's nodes.
func (f *follower) zoneNodes(zone string) []int {
	var out []int
	for i := range f.m.Nodes {
		if f.m.Nodes[i].Zone == zone {
			out = append(out, i)
		}
	}
	return out
}

// kill SIGKILLs every running process of the zone at once, then waits until
// all are gone.
func (f *follower) kill(zone string, scheduled time.Time) {
	ev := TimetableEvent{Kind: EventKill, Zone: zone, Nodes: []int{}, PIDs: []int{}, Scheduled: scheduled, ScheduledReal: f.clock.RealAt(scheduled)}
	ev.Real = time.Now()
	ev.Virtual = f.clock.At(ev.Real)
	var victims []int
	var errs []error
	for _, i := range f.zoneNodes(zone) {
		nd := &f.m.Nodes[i]
		if !f.m.alive(nd) {
			continue
		}
		if err := syscall.Kill(nd.PID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("SIGKILL node %d (pid %d): %w", i, nd.PID, err))
			continue
		}
		victims = append(victims, i)
		ev.Nodes = append(ev.Nodes, i)
		ev.PIDs = append(ev.PIDs, nd.PID)
	}
	for _, i := range victims {
		if err := f.m.waitGone(&f.m.Nodes[i], 10*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	ev.Done = time.Now()
	f.dark[zone] = true
	f.failed[zone], f.retries[zone] = false, 0 // the restore restarts them all
	f.rep.Kills += len(victims)
	f.record(ev, errors.Join(errs...))
}

// restart starts every process of the zone that is not running, in
// parallel, and waits until each has written its node.json.
func (f *follower) restart(ctx context.Context, zone string, scheduled time.Time) {
	ev := TimetableEvent{Kind: EventRestart, Zone: zone, Nodes: []int{}, PIDs: []int{}, Scheduled: scheduled, ScheduledReal: f.clock.RealAt(scheduled)}
	ev.Real = time.Now()
	ev.Virtual = f.clock.At(ev.Real)
	var idx []int
	for _, i := range f.zoneNodes(zone) {
		if !f.m.alive(&f.m.Nodes[i]) {
			idx = append(idx, i)
		}
	}
	errs := make([]error, len(idx))
	var wg sync.WaitGroup
	for k, i := range idx {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f.m.Restart(ctx, i); err != nil {
				errs[k] = fmt.Errorf("restart node %d: %w", i, err)
			}
		}()
	}
	wg.Wait()
	ev.Done = time.Now()
	err := errors.Join(errs...)
	f.failed[zone] = err != nil
	if err != nil {
		f.retries[zone]++
	} else {
		f.retries[zone] = 0
	}
	if err != nil && ctx.Err() != nil {
		// The follow is ending: not a failure of the testnet.
		ev.Error = "interrupted: " + strings.ReplaceAll(err.Error(), "\n", "; ")
		err = nil
	}
	nodesMu.Lock()
	for k, i := range idx {
		if errs[k] != nil {
			continue
		}
		nd := f.m.Nodes[i]
		ev.Nodes = append(ev.Nodes, i)
		ev.PIDs = append(ev.PIDs, nd.PID)
		addr := ""
		if len(nd.Addrs) > 0 {
			addr = nd.Addrs[0]
		}
		ev.Addrs = append(ev.Addrs, addr)
	}
	nodesMu.Unlock()
	f.dark[zone] = false
	f.rep.Restarts += len(ev.Nodes)
	f.record(ev, err)
}

// record completes ev, appends it to the report, prints it and hands it to
// OnEvent.
func (f *follower) record(ev TimetableEvent, err error) {
	ev.LagMs = ev.Real.Sub(ev.ScheduledReal).Milliseconds()
	if err != nil && ev.Error == "" {
		ev.Error = strings.ReplaceAll(err.Error(), "\n", "; ")
		f.rep.Errors++
	}
	f.rep.LagMsMax = max(f.rep.LagMsMax, ev.LagMs)
	f.rep.Events = append(f.rep.Events, ev)
	verb := "SIGKILL"
	if ev.Kind == EventRestart {
		verb = "restarted"
	}
	line := fmt.Sprintf("timetable %s: zone %s %s nodes %v (pids %v), %s late, took %s",
		ev.Scheduled.Format("2006-01-02 15:04"), ev.Zone, verb, ev.Nodes, ev.PIDs,
		time.Duration(ev.LagMs)*time.Millisecond, ev.Done.Sub(ev.Real).Round(time.Millisecond))
	if ev.Error != "" {
		line += "; error: " + ev.Error
	}
	fmt.Fprintln(f.progress, line)
	if f.onEvent != nil {
		ev.Nodes, ev.PIDs, ev.Addrs = slices.Clone(ev.Nodes), slices.Clone(ev.PIDs), slices.Clone(ev.Addrs)
		f.onEvent(ev)
	}
}
