package node_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/bedwe/bedwe/node"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/client"
	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/schedule"
)

// logRec keeps the timetable log lines of one node, so a test can wait for
// something that happened (a rejection, an ignored timetable) instead of
// sleeping.
type logRec struct {
	mu    sync.Mutex
	lines []string
}

func (r *logRec) has(parts ...string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
next:
	for _, l := range r.lines {
		for _, p := range parts {
			if !strings.Contains(l, p) {
				continue next
			}
		}
		return true
	}
	return false
}

func (r *logRec) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.lines, "\n")
}

type recHandler struct{ rec *logRec }

func (h recHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h recHandler) WithGroup(string) slog.Handler            { return h }
func (h recHandler) Handle(_ context.Context, r slog.Record) error {
	if !strings.Contains(r.Message, "timetable") {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	h.rec.mu.Lock()
	h.rec.lines = append(h.rec.lines, b.String())
	h.rec.mu.Unlock()
	return nil
}

// pubNode is one in-process node of the publish tests; it can be stopped
// and started again on the same data directory.
type pubNode struct {
	t    *testing.T
	name string
	cfg  node.Config
	rec  *logRec
	nf   api.NodeFile
	cl   *client.Client
	stop func()
}

func (p *pubNode) start() {
	t := p.t
	t.Helper()
	p.rec = &logRec{}
	cfg := p.cfg
	cfg.Logger = slog.New(recHandler{p.rec})
	nf, stopNode := runNode(t, cfg)
	p.nf = nf
	p.stop = func() {
		if p.cl != nil {
			p.cl.Close()
			p.cl = nil
		}
		stopNode()
	}
	t.Cleanup(p.stop)
	var err error
	dctx, dcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer dcancel()
	if p.cl, err = client.Dial(dctx, p.nf.Addrs...); err != nil {
		t.Fatalf("dial node %s: %v", p.name, err)
	}
}

// schedule asks the node which timetable is in force.
func (p *pubNode) schedule() api.ScheduleInfo {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	info, err := p.cl.Schedule(ctx)
	if err != nil {
		p.t.Fatalf("schedule op on %s: %v", p.name, err)
	}
	return info
}

// persisted reads the issued_at of DATA/schedule.signed.json.
func (p *pubNode) persisted() (time.Time, error) {
	raw, err := os.ReadFile(filepath.Join(p.cfg.DataDir, "schedule.signed.json"))
	if err != nil {
		return time.Time{}, err
	}
	sg, err := schedule.UnmarshalSigned(raw)
	if err != nil {
		return time.Time{}, err
	}
	s, err := schedule.Parse(sg.Schedule)
	if err != nil {
		return time.Time{}, err
	}
	return s.IssuedAt, nil
}

// holds waits until the node holds the signed timetable issued at want,
// in memory and on disk.
func (p *pubNode) holds(want time.Time, within time.Duration) {
	p.t.Helper()
	var last api.ScheduleInfo
	ok := poll(within, func() bool {
		last = p.schedule()
		disk, err := p.persisted()
		return last.Source == api.ScheduleSigned && last.IssuedAt.Equal(want) && err == nil && disk.Equal(want)
	})
	if !ok {
		p.t.Fatalf("node %s: want the signed timetable issued at %s within %s, holds %+v\nlog:\n%s", p.name, want, within, last, p.rec)
	}
}

// waitLog waits for a log line of the node containing every part.
func (p *pubNode) waitLog(within time.Duration, parts ...string) {
	p.t.Helper()
	if !poll(within, func() bool { return p.rec.has(parts...) }) {
		p.t.Fatalf("node %s: no log line with %q within %s; log:\n%s", p.name, parts, within, p.rec)
	}
}

func poll(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// newPubNode configures a node on loopback in network net whose identity
// is key (nil: a fresh one) and which trusts the trusted keys.
func newPubNode(t *testing.T, name, network string, key crypto.PrivKey, trusted [][]byte, bootstrap ...string) *pubNode {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if key != nil {
		raw, err := crypto.MarshalPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "identity.key"), raw, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := node.TestnetConfig()
	cfg.DataDir = dir
	cfg.Listen = []string{"/ip4/127.0.0.1/tcp/0"}
	cfg.Network = network
	cfg.Zone = "z-" + name
	cfg.TrustedKeys = trusted
	cfg.Bootstrap = bootstrap
	cfg.Routing = node.RoutingHeartbeat
	return &pubNode{t: t, name: name, cfg: cfg}
}

// timetableAt is the two-zone rotation example issued at the given instant.
func timetableAt(t *testing.T, issued time.Time) []byte {
	t.Helper()
	raw, err := os.ReadFile("../examples/schedules/two-zone-rotation.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(raw), "\n") {
		switch {
		case strings.HasPrefix(l, "issued_at:"):
			l = fmt.Sprintf("issued_at: %q", issued.Format(time.RFC3339))
		case strings.HasPrefix(l, "known_until:"):
			l = `known_until: "2099-01-01T00:00:00+02:00"`
		}
		out = append(out, l)
	}
	return []byte(strings.Join(out, "\n"))
}

// signedBy signs the timetable issued at issued with priv, as a publishing
// node would.
func signedBy(t *testing.T, issued time.Time, priv ed25519.PrivateKey) []byte {
	t.Helper()
	s, err := schedule.Parse(timetableAt(t, issued))
	if err != nil {
		t.Fatal(err)
	}
	sg, err := schedule.Sign(s, priv)
	if err != nil {
		t.Fatal(err)
	}
	env, err := sg.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// outsider is a plain libp2p host with its own gossipsub, connected to the
// nodes, that publishes whatever a test gives it on the timetable and
// presence topics and serves a timetable on the pull protocol.
type outsider struct {
	h        host.Host
	sched    *pubsub.Topic
	presence *pubsub.Topic
}

func newOutsider(t *testing.T, network string, nodes ...*pubNode) *outsider {
	t.Helper()
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	// Flood publishing sends to every subscribed node at once, without
	// waiting for a heartbeat to build the mesh.
	ps, err := pubsub.NewGossipSub(ctx, h, pubsub.WithFloodPublish(true))
	if err != nil {
		t.Fatal(err)
	}
	o := &outsider{h: h}
	if o.sched, err = ps.Join("/bedwe/" + network + "/schedule/1"); err != nil {
		t.Fatal(err)
	}
	if o.presence, err = ps.Join("/bedwe/" + network + "/presence/1"); err != nil {
		t.Fatal(err)
	}
	// Subscribe so the nodes graft us into their meshes; drain the messages.
	for _, tp := range []*pubsub.Topic{o.sched, o.presence} {
		sub, err := tp.Subscribe()
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				if _, err := sub.Next(ctx); err != nil {
					return
				}
			}
		}()
	}
	for _, n := range nodes {
		ai, err := peer.AddrInfoFromString(n.nf.Addrs[0])
		if err != nil {
			t.Fatal(err)
		}
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		err = h.Connect(cctx, *ai)
		ccancel()
		if err != nil {
			t.Fatalf("outsider: connect to %s: %v", n.name, err)
		}
	}
	if !poll(20*time.Second, func() bool { return len(o.sched.ListPeers()) >= len(nodes) }) {
		t.Fatalf("outsider: %d peers on the timetable topic, want %d", len(o.sched.ListPeers()), len(nodes))
	}
	return o
}

func (o *outsider) publish(t *testing.T, data []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := o.sched.Publish(ctx, data); err != nil {
		t.Fatal(err)
	}
}

// TestPublishSchedule runs one mesh through the life of published
// timetables: publish on A reaches B and C and is persisted; an older one
// is ignored; one signed by an untrusted key is rejected everywhere, on
// gossip and on the presence pull; a newer trusted one relayed by any peer
// is adopted; a node started later fetches the one in force; a restarted
// node keeps it.
func TestPublishSchedule(t *testing.T) {
	aKey, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	aRaw, _ := aKey.Raw()
	aPriv := ed25519.PrivateKey(aRaw)
	aPub := aPriv.Public().(ed25519.PublicKey)
	trusted := [][]byte{aPub}
	network := "test-publish-" + filepath.Base(t.TempDir())
	began := time.Now()
	phase := func(name string) { t.Logf("%6.2fs %s", time.Since(began).Seconds(), name) }
	t.Cleanup(func() { phase("nodes stopped") }) // runs after the nodes' cleanups

	a := newPubNode(t, "a", network, aKey, trusted)
	a.start()
	b := newPubNode(t, "b", network, nil, trusted, a.nf.Addrs[0])
	b.start()
	c := newPubNode(t, "c", network, nil, trusted, a.nf.Addrs[0])
	c.start()
	if got := a.nf.PublicKey; got != schedule.FormatPublicKey(aPub) {
		t.Fatalf("node.json public_key %q, want %q", got, schedule.FormatPublicKey(aPub))
	}
	phase("started a, b, c")
	// Everyone sees everyone: presence (and so pubsub) works.
	if !poll(30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		peers, err := a.cl.Peers(ctx)
		return err == nil && len(peers) == 3
	}) {
		t.Fatal("node a does not see b and c within 30s")
	}
	if info := b.schedule(); info.Source != api.ScheduleNone {
		t.Fatalf("before any publish b holds %+v", info)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	t1 := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

	phase("mesh formed")
	// Errors: a timetable that does not parse names FILE:LINE:COL.
	bad := strings.Replace(string(timetableAt(t, t1)), `start: "00:00", end: "02:00"`, `start: "25:00", end: "02:00"`, 1)
	_, err = a.cl.PublishSchedule(ctx, "bad.yaml", []byte(bad))
	var remote *client.RemoteError
	if !errors.As(err, &remote) || !strings.Contains(err.Error(), "bad.yaml:19:11: error:") || !strings.Contains(err.Error(), "nothing published") {
		t.Fatalf("publishing a bad timetable: %v, want a remote error with bad.yaml:19:11", err)
	}

	// Publish on A: A adopts it, B and C get it over gossip and persist it.
	res, err := a.cl.PublishSchedule(ctx, "t1.yaml", timetableAt(t, t1))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Adopted || !res.Gossiped || !res.Schedule.IssuedAt.Equal(t1) || res.Schedule.Signer != schedule.Fingerprint(aPub) {
		t.Fatalf("publish result %+v", res)
	}
	a.holds(t1, 5*time.Second)
	b.holds(t1, 20*time.Second)
	c.holds(t1, 20*time.Second)
	if info := c.schedule(); info.Signer != schedule.Fingerprint(aPub) || len(info.Zones) != 2 || info.TimeZone != "Africa/Johannesburg" {
		t.Errorf("c's timetable info %+v", info)
	}

	phase("published on a, reached b and c")
	// An older timetable published on A is not adopted and not gossiped,
	// and A says which one is newer.
	t0 := t1.Add(-24 * time.Hour)
	res, err = a.cl.PublishSchedule(ctx, "t0.yaml", timetableAt(t, t0))
	if err != nil {
		t.Fatal(err)
	}
	if res.Adopted || res.Gossiped || res.InForce == nil || !res.InForce.IssuedAt.Equal(t1) {
		t.Fatalf("publishing an older timetable: %+v, want not adopted with t1 in force", res)
	}
	// The same timetable again is gossiped again (for nodes that missed it).
	res, err = a.cl.PublishSchedule(ctx, "t1.yaml", timetableAt(t, t1))
	if err != nil || res.Adopted || !res.Gossiped {
		t.Fatalf("publishing the timetable in force again: %+v, %v; want gossiped, not adopted", res, err)
	}

	phase("older and repeated publish answered")
	// Over gossip, an older timetable signed by a trusted key is ignored.
	out := newOutsider(t, network, a, b, c)
	out.publish(t, signedBy(t, t0, aPriv))
	for _, n := range []*pubNode{a, b, c} {
		n.waitLog(20*time.Second, "timetable ignored", "from=gossip from "+rpc.ShortID(out.h.ID()))
		n.holds(t1, time.Second)
	}

	phase("older timetable ignored everywhere")
	// An untrusted signer is rejected everywhere, though its timetable is
	// the newest: on gossip, and when its peer announces it in presence
	// and serves it on the pull protocol.
	_, rogue, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	t3 := t1.Add(48 * time.Hour)
	rogueEnv := signedBy(t, t3, rogue)
	rogueFP := schedule.Fingerprint(rogue.Public().(ed25519.PublicKey))
	rpc.Serve(out.h, nil, api.ProtoSchedule, 4<<10, 10*time.Second, func(context.Context, peer.ID, []byte) []byte {
		return rpc.MustCBOR(api.ScheduleReply{Signed: rogueEnv})
	})
	out.publish(t, rogueEnv)
	out.publish(t, []byte(`{"format":"bedwe-signed-schedule/1","signer":"AAAA","signature":"AAAA","schedule":"AAAA"}`))
	out.publish(t, []byte("not even json"))
	ann, _ := json.Marshal(map[string]any{
		"id": out.h.ID().String(), "addrs": []string{}, "zone": "rogue", "services": []string{}, "patterns": []string{},
		"seq": 1, "boot": 1, "sched": t3.UnixNano(),
	})
	if err := out.presence.Publish(ctx, ann); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*pubNode{a, b, c} {
		n.waitLog(20*time.Second, "rejected a timetable", "from=gossip from", "signer="+rogueFP, "reason=untrusted signer")
		n.waitLog(20*time.Second, "rejected a timetable", "from=fetched from", "signer="+rogueFP)
		n.waitLog(20*time.Second, "rejected a timetable", "reason=malformed")
		n.holds(t1, time.Second)
	}

	phase("untrusted timetable rejected everywhere")
	// A newer timetable signed by a trusted key travels over gossip from
	// any peer, not only from its signer.
	t2 := t1.Add(24 * time.Hour)
	out.publish(t, signedBy(t, t2, aPriv))
	jhb, err := time.LoadLocation("Africa/Johannesburg")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []*pubNode{a, b, c} {
		n.holds(t2, 20*time.Second)
		// Adopted from the gossip, or (should a presence pull have been
		// quicker) ignored when the gossip arrived: either way it arrived.
		n.waitLog(5*time.Second, "from=gossip from "+rpc.ShortID(out.h.ID()), "issued_at="+t2.In(jhb).String())
	}

	phase("relayed newer timetable adopted")
	// A node whose own key is not trusted refuses to publish, and says
	// which key to trust.
	d := newPubNode(t, "d", network, nil, trusted, b.nf.Addrs[0])
	d.start()
	_, err = d.cl.PublishSchedule(ctx, "t3.yaml", timetableAt(t, t3))
	if err == nil || !strings.Contains(err.Error(), d.nf.PublicKey) || !strings.Contains(err.Error(), "--trusted-keys") {
		t.Fatalf("publishing from an untrusted node: %v, want a refusal naming its key %s", err, d.nf.PublicKey)
	}
	// D started after the publish: it fetches the timetable in force from
	// a peer that announces it.
	d.holds(t2, 30*time.Second)
	d.waitLog(time.Second, "timetable adopted", "from=fetched from")

	phase("late joiner fetched it")
	// A restarted node keeps the timetable it persisted (it has no
	// bootstrap peers here, so it cannot have fetched it again).
	b.stop()
	b.cfg.Bootstrap = nil
	b.start()
	if info := b.schedule(); info.Source != api.ScheduleSigned || !info.IssuedAt.Equal(t2) || info.Signer != schedule.Fingerprint(aPub) {
		t.Fatalf("after a restart b holds %+v, want the signed timetable issued at %s", info, t2)
	}
	if !b.rec.has("timetable restored") {
		t.Errorf("b did not log the restore; log:\n%s", b.rec)
	}
	phase("restarted node kept it")
}
