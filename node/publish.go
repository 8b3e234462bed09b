package node

// publish.go: signed timetables on the mesh.
//
// `bedwe schedule publish` hands a bedwe-schedule/1 document to a node (the
// publish-schedule client op). The node parses it, signs it with its libp2p
// Ed25519 key, checks the signature against its own trusted keys (a node
// whose key is not trusted would publish what nobody accepts), adopts it if
// it was issued later than the timetable it holds, and gossips the envelope
// on /bedwe/<network>/schedule/1. Every node verifies what arrives in a
// topic validator (size, envelope, trusted signer, signature, parse), so an
// unsigned or untrusted timetable is neither adopted nor relayed; a valid
// one is adopted when it is newer (offerSchedule persists it).
//
// Gossipsub keeps no history, so a node that was down or not yet started
// learns of a newer timetable from presence instead: every announcement
// carries the issued_at of the signed timetable in force (Sched), and a node
// that sees a newer one than it holds fetches the envelope from that peer
// over /bedwe/schedule/1.0.0 and verifies it the same way.

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/node/rpc"
	"github.com/bedwe/bedwe/schedule"
)

const (
	// maxGossipSchedule bounds an envelope sent on pubsub: the host's
	// pubsub message limit (1 MiB) less room for the message's own fields.
	// Larger timetables are adopted and served, not gossiped: peers fetch
	// them when they see the publisher's presence.
	maxGossipSchedule = 1<<20 - 8<<10
	// pullRetry is how long a node waits before fetching a timetable of the
	// same issued_at again after a fetch that brought nothing.
	pullRetry = 3 * time.Second
	// pullRejected is how long a node leaves an issued_at alone after the
	// envelope it fetched failed verification (an untrusted signer): its
	// trusted keys may change, but not every announcement interval.
	pullRejected = 2 * time.Minute
	// rejectWarnEvery rate-limits the warning for rejected timetables of one
	// signer and reason; repeats within it are logged at debug level.
	rejectWarnEvery = 10 * time.Minute
)

// schedulePub is the node's side of timetable publishing.
type schedulePub struct {
	topic *pubsub.Topic

	// adoptMu serialises adoption, so the envelope persisted and served is
	// always the one of the timetable the view holds.
	adoptMu sync.Mutex

	mu sync.Mutex
	// env is the envelope of the signed timetable in force (nil: none, or
	// a local file is in force), issued its issued_at in Unix nanoseconds
	// and signer the fingerprint of its key.
	env    []byte
	issued int64
	signer string
	// warned rate-limits rejection warnings per signer and reason.
	warned map[string]time.Time
	// pulling is set while one fetch is in flight; nextPull says when an
	// issued_at may be fetched again, badPeer when a peer that served an
	// envelope that did not verify may be asked again (whatever it
	// announces meanwhile).
	pulling  bool
	nextPull map[int64]time.Time
	badPeer  map[peer.ID]time.Time
}

// verified is what the topic validator hands the subscriber.
type verified struct {
	s  *schedule.Schedule
	sg *schedule.Signed
}

// startScheduleTopic joins the timetable topic with its validator, serves
// the pull protocol and adopts what arrives. It runs after startTimetable,
// so a restored signed timetable is served and announced at once.
func (n *Node) startScheduleTopic() error {
	sp := &schedulePub{warned: map[string]time.Time{}, nextPull: map[int64]time.Time{}, badPeer: map[peer.ID]time.Time{}}
	if env := n.signedSchedule(); env != nil {
		if s := n.tt.view.Schedule(); s != nil {
			signer := ""
			if sg, err := schedule.UnmarshalSigned(env); err == nil {
				signer = schedule.Fingerprint(sg.Signer)
			}
			sp.setCurrent(env, s.IssuedAt.UnixNano(), signer)
		}
	}
	n.sp = sp
	name := "/bedwe/" + n.cfg.Network + "/schedule/1"
	if err := n.ps.RegisterTopicValidator(name, n.validateSchedule); err != nil {
		return fmt.Errorf("node: timetable topic validator: %w", err)
	}
	t, err := n.ps.Join(name)
	if err != nil {
		return fmt.Errorf("node: join timetable topic: %w", err)
	}
	sp.topic = t
	sub, err := t.Subscribe()
	if err != nil {
		return fmt.Errorf("node: subscribe to timetable topic: %w", err)
	}
	n.calls.Serve(api.ProtoSchedule, 4<<10, n.cfg.StreamTimeout, n.handleSchedulePull)
	// Tracked, so nothing is persisted after Run returned.
	n.spawn(func(ctx context.Context) {
		for {
			msg, err := sub.Next(ctx)
			if err != nil {
				return
			}
			v, ok := msg.ValidatorData.(verified)
			if !ok || msg.ReceivedFrom == n.host.ID() {
				continue // published here: adopted before it was sent
			}
			n.adoptSigned(v.s, v.sg, msg.Data, "gossip from "+rpc.ShortID(msg.GetFrom()))
		}
	})
	return nil
}

func (sp *schedulePub) setCurrent(env []byte, issued int64, signer string) {
	sp.mu.Lock()
	sp.env, sp.issued, sp.signer = env, issued, signer
	sp.mu.Unlock()
}

func (sp *schedulePub) current() (env []byte, issued int64, signer string) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.env, sp.issued, sp.signer
}

// announcedSchedule is the issued_at (Unix nanoseconds) of the signed
// timetable in force, for presence; 0 when there is none or a local file
// is in force (it cannot be served to peers).
func (n *Node) announcedSchedule() int64 {
	if n.sp == nil {
		return 0
	}
	_, issued, _ := n.sp.current()
	return issued
}

// verifySchedule checks an envelope as every receiver does: size, shape,
// trusted signer, signature, and that the timetable parses. sg is returned
// when the envelope could be read, for logging the signer.
func (n *Node) verifySchedule(data []byte) (*schedule.Schedule, *schedule.Signed, error) {
	if len(data) > schedule.MaxSignedSize {
		return nil, nil, fmt.Errorf("%d bytes, more than the %d allowed: %w", len(data), schedule.MaxSignedSize, schedule.ErrMalformedSigned)
	}
	sg, err := schedule.UnmarshalSigned(data)
	if err != nil {
		return nil, nil, err
	}
	s, err := sg.Verify(n.trustedKeys())
	if err != nil {
		return nil, sg, err
	}
	return s, sg, nil
}

// validateSchedule is the timetable topic's validator: only envelopes that
// verify against this node's trusted keys are delivered and relayed.
func (n *Node) validateSchedule(_ context.Context, _ peer.ID, msg *pubsub.Message) pubsub.ValidationResult {
	s, sg, err := n.verifySchedule(msg.Data)
	if err != nil {
		n.rejectedSchedule("gossip from "+rpc.ShortID(msg.GetFrom()), sg, err)
		return pubsub.ValidationReject
	}
	msg.ValidatorData = verified{s: s, sg: sg}
	return pubsub.ValidationAccept
}

// rejectedSchedule logs a timetable that failed verification: at warn level
// once per rejectWarnEvery per signer and reason, at debug level otherwise.
func (n *Node) rejectedSchedule(from string, sg *schedule.Signed, err error) {
	signer, key := "unknown", ""
	if sg != nil && len(sg.Signer) == ed25519.PublicKeySize {
		signer = schedule.Fingerprint(sg.Signer)
		key = schedule.FormatPublicKey(sg.Signer)
	}
	reason := "malformed"
	switch {
	case errors.Is(err, schedule.ErrUntrustedSigner):
		reason = "untrusted signer"
	case errors.Is(err, schedule.ErrBadSignature):
		reason = "bad signature"
	}
	args := []any{"from", from, "signer", signer, "reason", reason, "err", err}
	if reason == "untrusted signer" {
		args = append(args, "key", key, "hint", "add the key to --trusted-keys or --trust to accept its timetables")
	}
	if n.sp.warnable(signer+"|"+reason, n.clock.Now()) {
		n.log.Warn("rejected a timetable", args...)
	} else {
		n.log.Debug("rejected a timetable", args...)
	}
}

// warnable reports whether a rejection keyed key, seen at now, is worth a
// warning (the first of its key within rejectWarnEvery).
func (sp *schedulePub) warnable(key string, now time.Time) bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if at, ok := sp.warned[key]; ok && now.Sub(at) < rejectWarnEvery {
		return false
	}
	if len(sp.warned) >= 256 {
		for k, at := range sp.warned {
			if now.Sub(at) >= rejectWarnEvery {
				delete(sp.warned, k)
			}
		}
		if len(sp.warned) >= 256 {
			return false // a flood of keys: stay quiet rather than grow
		}
	}
	sp.warned[key] = now
	return true
}

// adoptSigned installs a verified timetable if it is newer than the one in
// force, persists its envelope and serves it from then on. It reports
// whether the timetable was installed.
func (n *Node) adoptSigned(s *schedule.Schedule, sg *schedule.Signed, env []byte, from string) bool {
	n.sp.adoptMu.Lock()
	defer n.sp.adoptMu.Unlock()
	if !n.offerSchedule(s, env, from) {
		if cur := n.tt.view.Schedule(); cur != nil {
			n.log.Debug("timetable ignored: not newer than the one in force", "from", from,
				"issued_at", s.IssuedAt, "in_force_issued_at", cur.IssuedAt)
		}
		return false
	}
	// The next presence announcement, within AnnounceInterval, carries
	// the new issued_at: peers that missed the gossip fetch it then. (No
	// immediate announcement: the gossip is still on its way to most of
	// them.)
	n.sp.setCurrent(bytes.Clone(env), s.IssuedAt.UnixNano(), schedule.Fingerprint(sg.Signer))
	n.presenceMayChange()
	return true
}

// announceSoon asks for an early presence announcement.
func (n *Node) announceSoon() {
	select {
	case n.announceNow <- struct{}{}:
	default:
	}
}

// handleSchedulePull serves the signed timetable in force to a peer that
// holds an older one (or none). A local-file timetable is never served: it
// carries no signature a peer could check.
func (n *Node) handleSchedulePull(_ context.Context, _ peer.ID, req []byte) []byte {
	var r api.ScheduleRequest
	if err := rpc.Dec.Unmarshal(req, &r); err != nil {
		return nil
	}
	env, issued, _ := n.sp.current()
	if env == nil || issued <= r.Have {
		return rpc.MustCBOR(api.ScheduleReply{})
	}
	return rpc.MustCBOR(api.ScheduleReply{Signed: env})
}

// maybePullSchedule is called for every presence announcement: when the
// peer holds a signed timetable issued later than the one in force here, it
// fetches it in the background. One fetch is in flight at a time, and an
// issued_at is fetched again only after pullRetry (pullRejected when its
// envelope did not verify; a peer that served such an envelope is not asked
// again for pullRejected either).
func (n *Node) maybePullSchedule(from peer.ID, issued int64) {
	sp := n.sp
	if sp == nil || issued == 0 || n.ctx.Err() != nil {
		return
	}
	if cur := n.tt.view.Schedule(); cur != nil && cur.IssuedAt.UnixNano() >= issued {
		return
	}
	now := n.clock.Now()
	sp.mu.Lock()
	if sp.pulling || now.Before(sp.nextPull[issued]) || now.Before(sp.badPeer[from]) {
		sp.mu.Unlock()
		return
	}
	sp.pulling = true
	sp.nextPull[issued] = now.Add(pullRetry)
	if len(sp.nextPull) > 64 {
		for k, at := range sp.nextPull {
			if now.After(at) {
				delete(sp.nextPull, k)
			}
		}
	}
	for k, at := range sp.badPeer {
		if now.After(at) {
			delete(sp.badPeer, k)
		}
	}
	sp.mu.Unlock()
	n.spawn(func(ctx context.Context) {
		wait := n.pullSchedule(ctx, from)
		sp.mu.Lock()
		sp.pulling = false
		if wait > pullRetry {
			sp.nextPull[issued] = n.clock.Now().Add(wait)
			sp.badPeer[from] = n.clock.Now().Add(wait)
		}
		sp.mu.Unlock()
	})
}

// pullSchedule fetches, verifies and offers the signed timetable of peer
// from. It returns how long to leave that timetable alone if it failed.
func (n *Node) pullSchedule(ctx context.Context, from peer.ID) time.Duration {
	var have int64
	if cur := n.tt.view.Schedule(); cur != nil {
		have = cur.IssuedAt.UnixNano()
	}
	// The answer is bounded by the largest envelope a verifier accepts.
	raw, err := n.calls.Call(ctx, from, api.ProtoSchedule, rpc.MustCBOR(api.ScheduleRequest{Have: have}),
		schedule.MaxSignedSize+1024, n.cfg.StreamTimeout)
	if err != nil {
		n.log.Debug("fetch timetable", "peer", rpc.ShortID(from), "err", err)
		return pullRetry
	}
	var rep api.ScheduleReply
	if err := rpc.Dec.Unmarshal(raw, &rep); err != nil {
		n.rejectedSchedule("fetched from "+rpc.ShortID(from), nil, fmt.Errorf("decode the answer: %w: %w", schedule.ErrMalformedSigned, err))
		return pullRejected
	}
	if len(rep.Signed) == 0 {
		return pullRetry
	}
	label := "fetched from " + rpc.ShortID(from)
	s, sg, err := n.verifySchedule(rep.Signed)
	if err != nil {
		n.rejectedSchedule(label, sg, err)
		return pullRejected
	}
	n.adoptSigned(s, sg, rep.Signed, label)
	return 0
}

// scheduleInfo describes s for clients.
func scheduleInfo(s *schedule.Schedule, source, signer string) api.ScheduleInfo {
	info := api.ScheduleInfo{
		Source: source, IssuedAt: s.IssuedAt, KnownUntil: s.KnownUntil, Signer: signer,
		TimeZone: s.TimeZone, Feeds: len(s.Feeds), Note: s.Note,
	}
	for _, z := range s.Zones {
		info.Zones = append(info.Zones, z.Name)
	}
	return info
}

// scheduleInForce describes the timetable in force (the schedule client
// op).
func (n *Node) scheduleInForce() api.ScheduleInfo {
	n.sp.adoptMu.Lock()
	defer n.sp.adoptMu.Unlock()
	return n.scheduleInForceLocked()
}

func (n *Node) scheduleInForceLocked() api.ScheduleInfo {
	info := api.ScheduleInfo{Source: api.ScheduleNone}
	if s := n.tt.view.Schedule(); s != nil {
		info = scheduleInfo(s, api.ScheduleLocal, "")
		if env, issued, signer := n.sp.current(); env != nil && issued == s.IssuedAt.UnixNano() {
			info.Source, info.Signer = api.ScheduleSigned, signer
		}
	}
	info.Peer = n.selfID
	return info
}

// signingKey is the node's libp2p identity as a raw Ed25519 key.
func (n *Node) signingKey() (ed25519.PrivateKey, error) {
	k := n.host.Peerstore().PrivKey(n.host.ID())
	if k == nil {
		return nil, errors.New("this node has no private key")
	}
	if _, ok := k.(*crypto.Ed25519PrivateKey); !ok {
		return nil, fmt.Errorf("this node's identity is a %s key; timetables are signed with Ed25519 keys (move %s away to make a new identity)",
			k.Type(), filepath.Join(n.cfg.DataDir, "identity.key"))
	}
	raw, err := k.Raw()
	if err != nil {
		return nil, fmt.Errorf("read the node's key: %w", err)
	}
	if len(raw) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("the node's Ed25519 key is %d bytes, want %d", len(raw), ed25519.PrivateKeySize)
	}
	return ed25519.PrivateKey(raw), nil
}

// PublishSchedule signs the bedwe-schedule/1 document data with this
// node's key, adopts it if it was issued later than the timetable in force,
// and gossips it. fileName names the document in error messages. A
// timetable that does not parse, or that this node would not accept from
// itself (its key is not trusted), is an error; one that loses to the
// timetable in force is not (PublishResult.Adopted is false and InForce
// says what is kept).
func (n *Node) PublishSchedule(fileName string, data []byte) (api.PublishResult, error) {
	if fileName == "" {
		fileName = "schedule"
	}
	if len(data) == 0 {
		return api.PublishResult{}, fmt.Errorf("%s: the timetable is empty", fileName)
	}
	if len(data) > schedule.MaxFileSize {
		return api.PublishResult{}, fmt.Errorf("%s: %d bytes, more than the %d a timetable may have", fileName, len(data), schedule.MaxFileSize)
	}
	parsed, err := schedule.Parse(data)
	if err != nil {
		return api.PublishResult{}, problemsError(fileName, err)
	}
	priv, err := n.signingKey()
	if err != nil {
		return api.PublishResult{}, err
	}
	sg, err := schedule.Sign(parsed, priv)
	if err != nil {
		return api.PublishResult{}, fmt.Errorf("%s: %w", fileName, err)
	}
	env, err := sg.Marshal()
	if err != nil {
		return api.PublishResult{}, err
	}
	// Check it exactly as the receivers will, with this node's trusted
	// keys: the usual setup trusts the same keys everywhere.
	s, err := sg.Verify(n.trustedKeys())
	switch {
	case errors.Is(err, schedule.ErrUntrustedSigner):
		return api.PublishResult{}, fmt.Errorf("not published: this node's key (%s) is not among its trusted keys, so nodes "+
			"configured like it would reject what it signs. Add its public key\n\n    %s\n\nto the --trusted-keys FILE of every node, this one "+
			"included (`bedwe schedule key --data DIR` prints it; the file is re-read when it changes), or pass it with --trust KEY "+
			"(read at start), then publish again",
			schedule.Fingerprint(sg.Signer), schedule.FormatPublicKey(sg.Signer))
	case err != nil:
		return api.PublishResult{}, fmt.Errorf("%s: the signed timetable does not verify: %w", fileName, err)
	}
	res := api.PublishResult{
		Schedule: scheduleInfo(s, api.ScheduleSigned, schedule.Fingerprint(sg.Signer)),
		Bytes:    len(env),
	}
	res.Schedule.Peer = n.selfID
	now := n.tt.view.Now()
	if !s.KnownUntil.After(now) {
		res.Warnings = append(res.Warnings, fmt.Sprintf("known_until %s is already past (the node's timetable clock reads %s): every zone is unknown",
			s.KnownUntil.Format(time.RFC3339), now.Format(time.RFC3339)))
	}
	if s.IssuedAt.After(now.Add(10 * time.Minute)) {
		res.Warnings = append(res.Warnings, fmt.Sprintf("issued_at %s is in the future (the node's timetable clock reads %s): it wins over every timetable issued before it",
			s.IssuedAt.Format(time.RFC3339), now.Format(time.RFC3339)))
	}

	sp := n.sp
	sp.adoptMu.Lock()
	res.Adopted = n.offerSchedule(s, env, "published here")
	if res.Adopted {
		sp.setCurrent(env, s.IssuedAt.UnixNano(), res.Schedule.Signer)
		n.presenceMayChange()
	} else {
		cur := n.scheduleInForceLocked()
		res.InForce = &cur
	}
	held, _, _ := sp.current()
	sp.adoptMu.Unlock()
	if !res.Adopted {
		if !bytes.Equal(held, env) {
			return res, nil
		}
		res.Warnings = append(res.Warnings, "this very timetable is already in force on this node: it was gossiped again")
	}
	// Adopted, or the very timetable in force published again: gossip it
	// (again) for nodes that missed it. When it cannot go out, announce
	// presence at once instead: peers fetch it when they see the new
	// issued_at.
	if len(env) > maxGossipSchedule {
		res.Warnings = append(res.Warnings, fmt.Sprintf("the signed timetable is %d bytes, too large to gossip (limit %d): peers fetch it from this node when they see its presence",
			len(env), maxGossipSchedule))
		n.announceSoon()
		return res, nil
	}
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.StreamTimeout)
	defer cancel()
	if err := sp.topic.Publish(ctx, env); err != nil {
		res.Warnings = append(res.Warnings, fmt.Sprintf("gossip failed (%v): peers fetch it from this node when they see its presence", err))
		n.announceSoon()
		return res, nil
	}
	res.Gossiped = true
	res.Peers = len(sp.topic.ListPeers())
	if res.Peers == 0 {
		res.Warnings = append(res.Warnings, "no peer is subscribed to the timetable topic yet: peers fetch it from this node when they see its presence")
		n.announceSoon()
	}
	n.log.Info("timetable published", "issued_at", s.IssuedAt, "known_until", s.KnownUntil,
		"signer", res.Schedule.Signer, "bytes", len(env), "topic_peers", res.Peers)
	return res, nil
}

// problemsError renders a parse failure with FILE:LINE:COL per problem.
func problemsError(fileName string, err error) error {
	var pe *schedule.ProblemError
	if !errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", fileName, err)
	}
	var b strings.Builder
	errs := 0
	for _, p := range pe.Problems {
		if p.Severity == schedule.Error {
			errs++
		}
	}
	fmt.Fprintf(&b, "%s: %d error(s); nothing published", fileName, errs)
	for _, p := range pe.Problems {
		b.WriteString("\n")
		if p.Pos.Line == 0 {
			fmt.Fprintf(&b, "%s: %s: %s", fileName, p.Severity, p.Msg)
		} else {
			fmt.Fprintf(&b, "%s:%s: %s: %s", fileName, p.Pos, p.Severity, p.Msg)
		}
	}
	return errors.New(b.String())
}

// clientSchedule serves the publish-schedule and schedule client ops.
func (n *Node) clientSchedule(r api.ClientRequest) api.ClientResponse {
	if r.Op == api.OpSchedule {
		info := n.scheduleInForce()
		return api.ClientResponse{Schedule: &info}
	}
	res, err := n.PublishSchedule(r.FileName, r.Schedule)
	if err != nil {
		return api.ClientResponse{Error: err.Error()}
	}
	return api.ClientResponse{Published: &res}
}

// ReadPublicKey returns the raw Ed25519 public key and the peer ID of the
// node whose data directory is dir, from its identity key (it does not
// create one). The key is what other nodes trust to accept the timetables
// this node publishes.
func ReadPublicKey(dir string) (pub []byte, id string, err error) {
	path := filepath.Join(dir, "identity.key")
	raw, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, "", fmt.Errorf("no node identity in %s (missing %s): start `bedwe node --data %s` once to create it", dir, path, dir)
		}
		return nil, "", fmt.Errorf("read identity: %w", err)
	}
	key, err := crypto.UnmarshalPrivateKey(raw)
	if err != nil {
		return nil, "", fmt.Errorf("read identity %s: %w", path, err)
	}
	if _, ok := key.(*crypto.Ed25519PrivateKey); !ok {
		return nil, "", fmt.Errorf("identity %s is a %s key, not Ed25519: it cannot sign timetables", path, key.Type())
	}
	pub, err = key.GetPublic().Raw()
	if err != nil {
		return nil, "", fmt.Errorf("read identity %s: %w", path, err)
	}
	pid, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return nil, "", fmt.Errorf("read identity %s: %w", path, err)
	}
	return pub, pid.String(), nil
}
