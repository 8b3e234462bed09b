package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"

	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/bedwe/bedwe/breaker"
	"github.com/bedwe/bedwe/node/events"
	"github.com/bedwe/bedwe/node/join"
	"github.com/bedwe/bedwe/node/origin"
	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/pack"
	"github.com/bedwe/bedwe/schedule"
)

// Metrics (Config.HTTP, bedwe node --http): a Prometheus registry of the
// node's own, never the global one, so several nodes in one process (the
// tests) keep their counts apart.
//
// Counters are fed by the events (node/events): the events log's observer
// is metrics.observe, so every reliability event counted in a testnet's
// events.jsonl is counted here by the same call, with or without a file.
// Gauges are read when Prometheus scrapes (metricsCollector).
//
// Names (all prefixed bedwe_):
//
//	handoffs_total{outcome}               packs offered to a peer: ok, refused, error
//	handoff_duration_seconds{outcome}     round trip of each offer (histogram)
//	step_runs_total{outcome}              steps run here: ok, failed, cancelled
//	packs_accepted_total                  packs journaled and acknowledged
//	reroutes_total                        steps re-sent by this node as guardian
//	presence_announcements_total          presence announcements this node published
//	chains_superseded_total               superseded work dropped or refused here
//	suspicions_total                      peers the failure detector declared silent
//	suspicions_spared_total               late peers that answered a ping instead
//	join_takeovers_total                  joins a replica here took over
//	join_deliveries_total{result}         branch ends recorded or stale
//	origin_completions_total{result}      workflow ends recorded or stale
//	journal_write_duration_seconds{op}    journal commits with fsync (histogram)
//	streams_served_total{protocol}        streams a peer opened to this node, by protocol
//	mux_requests_served_total{protocol}   requests members sent on a shared session, by protocol
//	steps_running                         steps executing or waiting for a slot (the gossiped queue)
//	steps_queued                          accepted steps waiting for an execution slot
//	step_slots_free                       free execution slots (of --max-concurrent)
//	held_packs                            packs this node holds
//	guard_copies                          copies of handed-off packs it guards
//	join_copies{role}                     pending joins it holds: acting, replica
//	origin_workflows_running              running workflows it is origin of
//	draining                              1 while it drains before a power cut
//	peers{zone,power}                     the mesh it sees (itself included)
//	breakers{state}                       circuit breakers of the peers it sees
//
// Besides: Go runtime and process metrics (go_*, process_*) and libp2p's
// resource manager (libp2p_rcmgr_*); the latter are process-wide in
// go-libp2p, so in a process running several nodes each shows the sum.
type metrics struct {
	reg *prometheus.Registry

	handoffs       *prometheus.CounterVec
	handoffLatency *prometheus.HistogramVec
	stepRuns       *prometheus.CounterVec
	accepted       prometheus.Counter
	reroutes       prometheus.Counter
	announcements  prometheus.Counter
	superseded     prometheus.Counter
	suspicions     prometheus.Counter
	spared         prometheus.Counter
	joinTakeovers  prometheus.Counter
	deliveries     *prometheus.CounterVec
	completions    *prometheus.CounterVec
	journalWrites  *prometheus.HistogramVec
	streamsServed  *prometheus.CounterVec
	muxRequests    *prometheus.CounterVec
	stashes        *prometheus.CounterVec
}

// newMetrics makes the registry and registers everything but the node's
// gauges (registerGauges, once the node runs).
func newMetrics() *metrics {
	reg := prometheus.NewRegistry()
	m := &metrics{
		reg: reg,
		handoffs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bedwe_handoffs_total",
			Help: "Packs this node offered to a peer (itself included), by outcome: ok (acknowledged), refused (the peer answered no), error (no answer).",
		}, []string{"outcome"}),
		handoffLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "bedwe_handoff_duration_seconds",
			Help:    "Round trip of a pack offer, from sending it to the receiver's answer (its journal write, backup recruitment and settling included), by outcome.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"outcome"}),
		stepRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bedwe_step_runs_total",
			Help: "Steps this node ran (all tries of one attempt count once), by outcome: ok, failed (after its retries), cancelled.",
		}, []string{"outcome"}),
		accepted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bedwe_packs_accepted_total",
			Help: "Packs this node journaled and acknowledged.",
		}),
		reroutes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bedwe_reroutes_total",
			Help: "Steps this node re-sent as guardian (attempt+1) because their holder went silent or handed them back; each starts a new chain.",
		}),
		announcements: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bedwe_presence_announcements_total",
			Help: "Presence announcements this node published (changes and refreshes); each one reaches every peer, which verifies its signature.",
		}),
		superseded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bedwe_chains_superseded_total",
			Help: "Work of a superseded chain this node dropped or refused: the old chain stopped here after a re-route.",
		}),
		suspicions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bedwe_suspicions_total",
			Help: "Peers this node's failure detector declared silent.",
		}),
		spared: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bedwe_suspicions_spared_total",
			Help: "Peers whose beats were late but that answered a ping, so were not suspected (false suspicions avoided).",
		}),
		joinTakeovers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bedwe_join_takeovers_total",
			Help: "Joins a replica on this node took over from a silent actor.",
		}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bedwe_join_deliveries_total",
			Help: "Branch ends this node recorded as a join holder (result=recorded) or refused as already counted (result=stale).",
		}, []string{"result"}),
		completions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bedwe_origin_completions_total",
			Help: "Workflow ends this node recorded as origin or origin replica (result=recorded) or received after the first (result=stale).",
		}, []string{"result"}),
		journalWrites: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "bedwe_journal_write_duration_seconds",
			Help:    "Journal writes, commit and fsync included, by op: update (one write) or batch (a shared commit).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"op"}),
		muxRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bedwe_mux_requests_served_total",
			Help: "Requests members sent this node on a shared session (" + rpc.ProtoMux + "), by protocol: each would be a stream of its own without it (bedwe_streams_served_total counts those).",
		}, []string{"protocol"}),
		stashes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bedwe_stashes_total",
			Help: "Times this node asked a workflow's origin copies to keep outputs nobody ahead can name before dropping them from the pack it hands on, by outcome: ok (dropped), refused or error (kept in the pack).",
		}, []string{"outcome"}),
		streamsServed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bedwe_streams_served_total",
			Help: "Streams a peer (or a client) opened to this node, by protocol ID, counted before the membership gate: what a hop costs in streams (bedwe bench's overhead experiment reads it).",
		}, []string{"protocol"}),
	}
	reg.MustRegister(m.streamsServed, m.muxRequests, m.handoffs, m.handoffLatency, m.stepRuns, m.accepted, m.reroutes, m.announcements, m.superseded,
		m.suspicions, m.spared, m.joinTakeovers, m.deliveries, m.completions, m.journalWrites, m.stashes)
	// Series that exist from the start, so a rate() sees the first one.
	for _, o := range []string{events.OutcomeOK, events.OutcomeRefused, events.OutcomeError} {
		m.handoffs.WithLabelValues(o)
	}
	for _, o := range []string{events.OutcomeOK, events.OutcomeFailed, events.OutcomeCancelled} {
		m.stepRuns.WithLabelValues(o)
	}
	for _, r := range []string{"recorded", "stale"} {
		m.deliveries.WithLabelValues(r)
		m.completions.WithLabelValues(r)
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// go-libp2p's resource manager reports into package-level collectors
	// (rcmgr.NewStatsTraceReporter, on unless WithMetricsDisabled); they
	// may be registered with any registry, this one included.
	rcmgr.MustRegisterWith(reg)
	return m
}

// observe counts one event (the events log's observer).
func (m *metrics) observe(e events.Event) {
	switch e.Type {
	case events.Handoff:
		m.handoffs.WithLabelValues(e.Outcome).Inc()
		m.handoffLatency.WithLabelValues(e.Outcome).Observe(e.Seconds)
	case events.StepRun:
		m.stepRuns.WithLabelValues(e.Outcome).Inc()
	case events.Accepted:
		m.accepted.Inc()
	case events.Reroute:
		m.reroutes.Inc()
	case events.Superseded:
		m.superseded.Inc()
	case events.Suspect:
		m.suspicions.Inc()
	case events.Spared:
		m.spared.Inc()
	case events.JoinTakeover:
		m.joinTakeovers.Inc()
	case events.Delivery:
		m.deliveries.WithLabelValues(staleLabel(e.Stale)).Inc()
	case events.Completed:
		m.completions.WithLabelValues(staleLabel(e.Stale)).Inc()
	case events.Stashed:
		m.stashes.WithLabelValues(e.Outcome).Inc()
	}
}

func staleLabel(stale bool) string {
	if stale {
		return "stale"
	}
	return "recorded"
}

// observeJournal is the journal's write observer.
func (m *metrics) observeJournal(op string, d time.Duration) {
	m.journalWrites.WithLabelValues(op).Observe(d.Seconds())
}

// stepRunEvent describes one run of p's head step (execute's result) for
// the events: its outcome and how long its tries took.
func stepRunEvent(ctx context.Context, p *pack.Pack, trace []pack.TraceEntry, err error) events.Event {
	e := events.Event{Type: events.StepRun, Workflow: p.WorkflowID, Step: headPath(p), Attempt: p.Attempt, Outcome: events.OutcomeOK}
	switch {
	case errors.Is(err, errCancelled) || ctx.Err() != nil:
		e.Outcome = events.OutcomeCancelled
	case err != nil:
		e.Outcome = events.OutcomeFailed
	}
	if len(trace) > 0 {
		e.Seconds = trace[len(trace)-1].End.Sub(trace[0].Start).Seconds()
	}
	return e
}

// handoffEvent describes one offer of p to target that lasted took: err
// is the call's (transport or decoding) error, ok and code the answer's
// (api.Ack).
func handoffEvent(p *pack.Pack, target fmt.Stringer, took time.Duration, err error, ok bool, code string) events.Event {
	e := events.Event{Type: events.Handoff, Workflow: p.WorkflowID, Step: headPath(p), Attempt: p.Attempt,
		To: target.String(), Seconds: took.Seconds(), Outcome: events.OutcomeOK}
	switch {
	case err != nil:
		e.Outcome, e.Reason = events.OutcomeError, err.Error()
	case !ok:
		e.Outcome, e.Reason = events.OutcomeRefused, code
	}
	return e
}

// metricsCollector reads the node's gauges at scrape time. It takes no
// lock that is held across I/O: the held, guard, join and origin tables
// publish their committed machines through atomic pointers.
type metricsCollector struct {
	n *Node

	stepsRunning, stepsQueued, slotsFree, heldPacks, guardCopies, guardPending, joinCopies, originsRunning, draining, peers, breakers, connections *prometheus.Desc
}

type heldCounts struct{ held, origins int }

func newMetricsCollector(n *Node) *metricsCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &metricsCollector{
		n:              n,
		stepsRunning:   d("bedwe_steps_running", "Steps executing on this node now or waiting for an execution slot: the queue length it gossips."),
		stepsQueued:    d("bedwe_steps_queued", "Steps accepted by this node and waiting for an execution slot (with the running ones at most --max-concurrent + --queue; beyond it hand-offs are refused as busy)."),
		slotsFree:      d("bedwe_step_slots_free", "Execution slots free on this node now (of --max-concurrent)."),
		heldPacks:      d("bedwe_held_packs", "Packs this node holds: acknowledged, to run or move on."),
		guardCopies:    d("bedwe_guard_copies", "Copies of handed-off packs this node keeps as guardian."),
		guardPending:   d("bedwe_guard_pending_copies", "Guard copies released by a successor and kept until the release is confirmed (node/guard G17)."),
		joinCopies:     d("bedwe_join_copies", "Pending joins this node holds a copy of, by role: acting (it acts for the join) or replica.", "role"),
		originsRunning: d("bedwe_origin_workflows_running", "Running workflows this node is the origin of."),
		draining:       d("bedwe_draining", "1 while this node drains before its zone's power cut, else 0."),
		peers:          d("bedwe_peers", "Peers in this node's view of the mesh (itself included), by zone and power now per the timetable: powered, dark, unknown (beyond the timetable or zone not in it) or none (no timetable).", "zone", "power"),
		breakers:       d("bedwe_breakers", "Circuit breakers of the peers in this node's view, by state: closed, open, half-open.", "state"),
		connections:    d("bedwe_connections", "Connections open to other peers now (nothing trims them: hops and requests open them, and they stay until a peer goes away)."),
	}
}

// Describe implements prometheus.Collector.
func (c *metricsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.stepsRunning, c.stepsQueued, c.slotsFree, c.heldPacks, c.guardCopies, c.guardPending, c.joinCopies, c.originsRunning, c.draining, c.peers, c.breakers, c.connections} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *metricsCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.n
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(c.stepsRunning, float64(n.running.Load()))
	bs := n.bulk.Stats()
	gauge(c.stepsQueued, float64(bs.Queued))
	gauge(c.slotsFree, float64(bs.Free()))
	drain := 0.0
	if n.draining.Load() {
		drain = 1
	}
	gauge(c.draining, drain)

	counts := c.heldCounts()
	gauge(c.heldPacks, float64(counts.held))
	gauge(c.originsRunning, float64(counts.origins))

	// The tables' locks guard their maps only (no I/O under them).
	copies, pending := 0, 0
	for _, g := range n.guards.all() {
		if g.Copy() != nil {
			copies++
		}
		if g.Pending() != nil {
			pending++
		}
	}
	gauge(c.guardCopies, float64(copies))
	gauge(c.guardPending, float64(pending))
	gauge(c.connections, float64(len(n.host.Network().Conns())))
	acting, replica := 0, 0
	for _, jc := range n.joins.all() {
		jc.view(func(m *join.Join) {
			switch {
			case !m.Pending():
			case m.Acting():
				acting++
			default:
				replica++
			}
		})
	}
	gauge(c.joinCopies, float64(acting), "acting")
	gauge(c.joinCopies, float64(replica), "replica")

	if n.pres == nil {
		return
	}
	type zp struct{ zone, power string }
	peers := map[zp]int{{n.cfg.Zone, c.power(n.cfg.Zone)}: 1}
	states := map[breaker.State]int{breaker.Closed: 0, breaker.Open: 0, breaker.HalfOpen: 0}
	for _, lp := range n.pres.live() {
		peers[zp{lp.ann.Zone, c.power(lp.ann.Zone)}]++
		states[n.breakers.State(lp.ann.ID)]++
	}
	for k, v := range peers {
		gauge(c.peers, float64(v), k.zone, k.power)
	}
	for s, v := range states {
		gauge(c.breakers, float64(v), string(s))
	}
}

// power is zone's power state now per the timetable in force.
func (c *metricsCollector) power(zone string) string {
	view := c.n.tt.view
	if view.Schedule() == nil {
		return "none"
	}
	switch view.Powered(zone, view.Now()) {
	case schedule.Powered:
		return "powered"
	case schedule.Dark:
		return "dark"
	}
	return "unknown"
}

// heldCounts counts held packs (not the origin's first packs) and the
// running workflows this peer is the origin of.
func (c *metricsCollector) heldCounts() heldCounts {
	var hc heldCounts
	for _, s := range c.n.helds.all() {
		if m := s.view(); !m.Phase().Ended() && !m.Record().DispatchOnly {
			hc.held++
		}
	}
	for _, w := range c.n.origins.all() {
		if w.Role() == origin.RolePrimary && w.State() == origin.StateRunning {
			hc.origins++
		}
	}
	return hc
}

// checkHTTPAddr checks Config.HTTP: HOST:PORT, and a loopback host unless
// public.
func checkHTTPAddr(addr string, public bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("node: --http %q: want HOST:PORT, e.g. 127.0.0.1:9464", addr)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("node: --http %q: port %q is not a number from 0 to 65535", addr, port)
	}
	if public {
		return nil
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		what := "not a loopback address"
		if host == "" {
			what = "every address of this machine"
		}
		return fmt.Errorf("node: --http %s is %s: /metrics, the dashboard (and /debug/pprof/ with --pprof) answer anyone who can reach it; use 127.0.0.1:%s, or add --http-public to serve it there anyway", addr, what, port)
	}
	return nil
}

// serveHTTP listens on Config.HTTP and serves /metrics, the dashboard
// (/ and /api/..., dashboard.go) and /debug/pprof/ with Config.Pprof until
// stop is called; it returns the address it listens on.
func (n *Node) serveHTTP() (addr string, stop func(), err error) {
	n.metrics.reg.MustRegister(newMetricsCollector(n))
	ln, err := net.Listen("tcp", n.cfg.HTTP)
	if err != nil {
		return "", nil, fmt.Errorf("node: --http %s: %w", n.cfg.HTTP, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(n.metrics.reg, promhttp.HandlerOpts{
		Registry:            n.metrics.reg, // promhttp_metric_handler_errors_total
		MaxRequestsInFlight: 2,
		Timeout:             10 * time.Second,
	}))
	if n.cfg.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	n.addDashboard(mux)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Warn("metrics listener stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	n.log.Info("serving metrics", "addr", "http://"+ln.Addr().String()+"/metrics", "pprof", n.cfg.Pprof)
	return ln.Addr().String(), func() { _ = srv.Close() }, nil
}
