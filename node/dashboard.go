package node

import (
	"embed"
	"encoding/json"
	"io/fs"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/bedwe/bedwe/grammar"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/origin"
	"github.com/bedwe/bedwe/pack"
	"github.com/bedwe/bedwe/schedule"
)

// The dashboard (Config.HTTP, page /): a read-only web page embedded in
// the binary (node/web: plain HTML, one JavaScript file, one stylesheet,
// no build step, nothing fetched from elsewhere) that polls four JSON
// endpoints once a second:
//
//	/api/mesh            the peers this node sees, by zone, with power now,
//	                     next cut, suspicion, breaker, queue, draining
//	/api/workflows       the workflows this node is the origin of
//	/api/workflows/{id}  one of them: its steps (the workflow's structure)
//	                     and every step attempt known (the trace)
//	/api/timetable       per zone, its powered, dark and unknown stretches
//	                     over the next 24 hours of timetable time
//
// It rides on the listener's rules (loopback unless --http-public; on a
// loopback listener it also wants a loopback Host, against DNS rebinding). The
// handlers take no lock held across journal I/O: the origin table
// publishes committed machines through atomic pointers, presence and the
// breakers lock their maps only.

//go:embed web
var webFiles embed.FS

// dashboardHorizon is how far ahead /api/timetable looks.
const dashboardHorizon = 24 * time.Hour

// addDashboard registers the page and its JSON endpoints on mux.
func (n *Node) addDashboard(mux *http.ServeMux) {
	static, err := fs.Sub(webFiles, "web")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	handle := func(pattern string, h http.Handler) {
		if !n.cfg.HTTPPublic {
			h = loopbackHost(h)
		}
		mux.Handle(pattern, h)
	}
	files := http.FileServerFS(static)
	handle("GET /{$}", files)
	for _, f := range []string{"/app.js", "/style.css"} {
		handle("GET "+f, files)
	}
	handle("GET /api/mesh", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, n.dashMesh()) }))
	handle("GET /api/workflows", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, n.dashWorkflows()) }))
	handle("GET /api/workflows/{id}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wf, ok := n.dashWorkflow(r.PathValue("id"))
		if !ok {
			http.Error(w, "this node is not the origin of workflow "+r.PathValue("id"), http.StatusNotFound)
			return
		}
		writeJSON(w, wf)
	}))
	handle("GET /api/timetable", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, n.dashTimetable()) }))
}

// loopbackHost refuses requests whose Host is not a loopback address or
// localhost: on a loopback listener, a page elsewhere that re-binds its
// own name to 127.0.0.1 (DNS rebinding) cannot read the dashboard.
func loopbackHost(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			host = r.Host
		}
		host = strings.Trim(host, "[]")
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			http.Error(w, "dashboard: Host "+r.Host+" is not a loopback address; browse http://127.0.0.1:PORT/ (an ssh tunnel for a remote node), or start the node with --http-public", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	_ = enc.Encode(v)
}

// DashMesh is /api/mesh: this node's view of the mesh.
type DashMesh struct {
	Self string `json:"self"`
	Zone string `json:"zone"`
	// Now is the timetable's time (the virtual clock in testnets).
	Now time.Time `json:"now"`
	// Timetable says whether a timetable is in force.
	Timetable bool       `json:"timetable"`
	Peers     []DashPeer `json:"peers"`
}

// DashPeer is one peer in DashMesh (the node itself included).
type DashPeer struct {
	api.PeerInfo
	// NextCut is the start of the zone's next dark window (zero: none
	// known); Suspected says the failure detector declared it silent.
	NextCut   time.Time `json:"next_cut,omitempty"`
	Suspected bool      `json:"suspected,omitempty"`
}

func (n *Node) dashMesh() DashMesh {
	m := DashMesh{Self: n.selfID, Zone: n.cfg.Zone, Peers: []DashPeer{}}
	view := n.tt.view
	s := view.Schedule()
	m.Now, m.Timetable = view.Now(), s != nil
	if n.pres == nil {
		return m
	}
	for _, pi := range n.pres.infos() {
		pi.Addrs, pi.Services, pi.Patterns = nil, nil, nil
		dp := DashPeer{PeerInfo: pi, Suspected: !pi.Self && view.Suspected(pi.ID)}
		if s != nil {
			if at, ok := s.NextCut(pi.Zone, m.Now); ok {
				dp.NextCut = at
			}
		}
		m.Peers = append(m.Peers, dp)
	}
	return m
}

// DashWorkflow is one workflow in /api/workflows, and with Steps and
// Trace /api/workflows/{id}.
type DashWorkflow struct {
	api.Status
	// Steps are the workflow's structure (nil in the list).
	Steps *DashStep `json:"steps,omitempty"`
	// Source is the workflow's text (single workflow only).
	Source string `json:"source,omitempty"`
}

func (n *Node) dashWorkflows() []DashWorkflow {
	out := []DashWorkflow{}
	for _, w := range n.origins.all() {
		if w.Role() != origin.RolePrimary {
			continue
		}
		out = append(out, DashWorkflow{Status: w.Summary()})
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Submitted.Equal(out[j].Submitted) {
			return out[i].Submitted.After(out[j].Submitted)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

func (n *Node) dashWorkflow(id string) (DashWorkflow, bool) {
	w := n.origins.view(id)
	if w == nil || w.Role() != origin.RolePrimary {
		return DashWorkflow{}, false
	}
	st := w.Status(true)
	// While it runs, the record keeps the latest attempts only: add what
	// this run of the node saw reported.
	if st.State == api.StateRunning || len(st.Trace) == 0 {
		st.Trace = mergeTrace(n.progress.get(id), st.Recent)
	}
	st.Recent = nil
	rec := w.Record()
	wf := DashWorkflow{Status: st, Source: rec.Source}
	if g, err := grammar.Parse("workflow", []byte(rec.Source)); err == nil {
		grammar.AssignPaths(g)
		wf.Steps = dashSeq(g, "seq", "")
	}
	return wf, true
}

// mergeTrace joins two lists of attempts without repeats, by start time.
func mergeTrace(a, b []pack.TraceEntry) []pack.TraceEntry {
	out := slices.Clone(a)
	for _, e := range b {
		if !slices.ContainsFunc(out, func(x pack.TraceEntry) bool { return sameAttempt(x, e) }) {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}

func sameAttempt(a, b pack.TraceEntry) bool {
	return a.Path == b.Path && a.Peer == b.Peer && a.Attempt == b.Attempt && a.Start.Equal(b.Start)
}

// DashStep is a node of a workflow's structure: a service (Path set), a
// sequence, or a pattern (fork, choice, first, failover) whose Children
// are its branches (each a sequence).
type DashStep struct {
	Kind     string      `json:"kind"`
	Service  string      `json:"service,omitempty"`
	Path     string      `json:"path,omitempty"`
	Label    string      `json:"label,omitempty"`
	Children []*DashStep `json:"children,omitempty"`
}

func dashSeq(w *grammar.Workflow, kind, label string) *DashStep {
	d := &DashStep{Kind: kind, Label: label}
	if w == nil {
		return d
	}
	for _, s := range w.Steps {
		d.Children = append(d.Children, dashStep(s))
	}
	return d
}

func dashStep(s grammar.Step) *DashStep {
	var kind string
	var branches []*grammar.Workflow
	var labels []string
	switch s := s.(type) {
	case *grammar.Service:
		return &DashStep{Kind: "service", Service: s.Name, Path: s.Path}
	case *grammar.Fork:
		kind, branches = "fork", s.Branches
	case *grammar.First:
		kind, branches = "first", s.Branches
	case *grammar.Failover:
		kind, branches = "failover", s.Branches
	case *grammar.Choice:
		kind = "choice"
		for _, a := range s.Arms {
			branches = append(branches, a.Body)
			labels = append(labels, map[grammar.ArmKind]string{grammar.ArmIf: a.Guard, grammar.ArmElse: "ELSE"}[a.Kind])
		}
	}
	d := &DashStep{Kind: kind}
	for i, b := range branches {
		l := ""
		if i < len(labels) {
			l = labels[i]
		}
		d.Children = append(d.Children, dashSeq(b, "seq", l))
	}
	return d
}

// DashTimetable is /api/timetable.
type DashTimetable struct {
	Now        time.Time  `json:"now"`
	From       time.Time  `json:"from"`
	To         time.Time  `json:"to"`
	Timetable  bool       `json:"timetable"`
	KnownUntil time.Time  `json:"known_until,omitempty"`
	Zones      []DashZone `json:"zones"`
}

// DashZone is one zone's stretches in DashTimetable.
type DashZone struct {
	Zone    string        `json:"zone"`
	Windows []DashStretch `json:"windows"`
}

// DashStretch is a stretch of one power state: powered, dark or unknown.
type DashStretch struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	State string    `json:"state"`
	Stage int       `json:"stage,omitempty"`
}

func (n *Node) dashTimetable() DashTimetable {
	view := n.tt.view
	now := view.Now()
	t := DashTimetable{Now: now, From: now, To: now.Add(dashboardHorizon), Zones: []DashZone{}}
	s := view.Schedule()
	if s == nil {
		return t
	}
	t.Timetable, t.KnownUntil = true, s.KnownUntil
	zones := map[string]bool{}
	for _, z := range s.Zones {
		zones[z.Name] = true
	}
	if n.pres != nil {
		for _, pi := range n.pres.infos() {
			zones[pi.Zone] = true
		}
	}
	names := make([]string, 0, len(zones))
	for z := range zones {
		names = append(names, z)
	}
	sort.Strings(names)
	for _, z := range names {
		t.Zones = append(t.Zones, DashZone{Zone: z, Windows: stretches(s, z, t.From, t.To)})
	}
	return t
}

// stretches splits [from, to) into the zone's dark windows and the gaps
// between them, each gap named by the state at its start.
func stretches(s *schedule.Schedule, zone string, from, to time.Time) []DashStretch {
	out := []DashStretch{}
	gap := func(a, b time.Time) {
		if !a.Before(b) {
			return
		}
		st, _ := s.StateAt(zone, a)
		if st == schedule.Dark { // a window the list left out: say so anyway
			st = schedule.Unknown
		}
		end := b
		if st == schedule.Powered && s.KnownUntil.After(a) && s.KnownUntil.Before(b) {
			end = s.KnownUntil
		}
		out = append(out, DashStretch{Start: a, End: end, State: st.String()})
		if end.Before(b) {
			out = append(out, DashStretch{Start: end, End: b, State: schedule.Unknown.String()})
		}
	}
	at := from
	for _, w := range s.Windows(zone, from, to) {
		gap(at, w.Start)
		out = append(out, DashStretch{Start: w.Start, End: w.End, State: schedule.Dark.String(), Stage: w.Stage})
		at = w.End
	}
	gap(at, to)
	return out
}

// progressLog keeps the step attempts reported to this node as origin
// while their workflow runs (the record keeps the latest few only), for
// the dashboard; in memory, bounded, dropped when the workflow ends.
type progressLog struct {
	mu   sync.Mutex // guards byID (no I/O under it)
	byID map[string][]pack.TraceEntry
}

// progressKeep bounds the attempts kept per workflow, progressWorkflows
// the workflows kept.
const (
	progressKeep      = 1000
	progressWorkflows = 256
)

func newProgressLog() *progressLog { return &progressLog{byID: map[string][]pack.TraceEntry{}} }

func (l *progressLog) add(id string, e pack.TraceEntry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.byID[id]; !ok && len(l.byID) >= progressWorkflows {
		return
	}
	if len(l.byID[id]) < progressKeep {
		l.byID[id] = append(l.byID[id], e)
	}
}

func (l *progressLog) get(id string) []pack.TraceEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.byID[id])
}

func (l *progressLog) drop(id string) {
	l.mu.Lock()
	delete(l.byID, id)
	l.mu.Unlock()
}
