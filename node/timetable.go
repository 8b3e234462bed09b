package node

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/bedwe/bedwe/internal/atomicfile"
	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/outage"
	"github.com/bedwe/bedwe/schedule"
)

// scheduleSignedFile is where a node persists the newest signed timetable it
// accepted, so it survives restarts (it is verified again on load).
const scheduleSignedFile = "schedule.signed.json"

// timetable is the node's side of the load-shedding timetable: the outage
// view every timetable decision asks, the clock those decisions read, and
// the trusted signers of gossiped timetables.
type timetable struct {
	view  *outage.View
	clock ttClock

	keysMu    sync.Mutex
	keysFile  string
	keysMod   time.Time
	fileKeys  [][]byte
	fixedKeys [][]byte

	// signed is the envelope of the timetable in force when it came signed
	// (nil for a local file), served to peers that ask for it.
	signedMu sync.Mutex
	signed   []byte
}

// ttClock is the timetable clock (Config.Clock) driven by the node's clock
// (Config.Env) instead of the wall clock, so that a simulated node's
// timetable decisions follow simulated time. Its Virtual, Real and
// RealAt are the virtual clock's.
type ttClock struct {
	schedule.VirtualClock
	base clockwork.Clock
}

// Now is the timetable time at the node's now.
func (c ttClock) Now() time.Time { return c.At(c.base.Now()) }

// startTimetable builds the outage view from the configured timetable file
// and the persisted signed timetable, whichever was issued later.
func (n *Node) startTimetable() error {
	t := &timetable{clock: ttClock{VirtualClock: n.cfg.Clock, base: n.clock}, keysFile: n.cfg.TrustedKeysFile, fixedKeys: n.cfg.TrustedKeys}
	// Liveness in the view must agree with presence, which the node keeps
	// in real time: a peer is live as long as presence keeps it.
	ocfg := n.cfg.Outage
	ocfg.PresenceTTL = t.clock.Virtual(n.cfg.PresenceTTL)
	ocfg.SuspectFor = t.clock.Virtual(n.cfg.SuspectMemory)
	view, err := outage.NewView(t.clock, ocfg, nil)
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	t.view = view
	n.tt = t
	if n.cfg.ScheduleFile != "" {
		s, err := schedule.Load(n.cfg.ScheduleFile)
		if err != nil {
			return fmt.Errorf("node: timetable: %w", err)
		}
		view.Offer(s)
		n.log.Info("timetable loaded", "file", n.cfg.ScheduleFile, "issued_at", s.IssuedAt, "known_until", s.KnownUntil)
	}
	path := filepath.Join(n.cfg.DataDir, scheduleSignedFile)
	raw, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("node: read %s: %w", path, err)
	default:
		sg, err := schedule.UnmarshalSigned(raw)
		var s *schedule.Schedule
		if err == nil {
			s, err = sg.Verify(n.trustedKeys())
		}
		if err != nil {
			// Keys may have changed since it was stored: it is not trusted
			// any more, which is no reason not to start.
			n.log.Warn("ignoring the stored timetable", "file", path, "err", err)
			break
		}
		if view.Offer(s) {
			t.setSigned(raw)
			n.log.Info("timetable restored", "file", path, "issued_at", s.IssuedAt, "signer", schedule.Fingerprint(sg.Signer))
		}
	}
	return nil
}

// timetableRouting reports whether peer choice and drain follow the
// timetable (RoutingTimetable and a timetable in force).
func (n *Node) timetableRouting() bool {
	return n.cfg.Routing == RoutingTimetable && n.tt != nil && n.tt.view.Schedule() != nil
}

// offerSchedule installs s if it is newer than the timetable in force;
// signed is its verified envelope (nil for a local file), persisted so the
// timetable survives a restart. It reports whether s was installed.
func (n *Node) offerSchedule(s *schedule.Schedule, signed []byte, from string) bool {
	if !n.tt.view.Offer(s) {
		return false
	}
	if signed != nil {
		n.tt.setSigned(signed)
		path := filepath.Join(n.cfg.DataDir, scheduleSignedFile)
		if err := atomicfile.Write(path, signed, 0o644); err != nil {
			n.log.Error("persist timetable", "file", path, "err", err)
		}
	}
	n.log.Info("timetable adopted", "from", from, "issued_at", s.IssuedAt, "known_until", s.KnownUntil)
	n.kickDrain()
	return true
}

func (t *timetable) setSigned(b []byte) {
	t.signedMu.Lock()
	t.signed = bytes.Clone(b)
	t.signedMu.Unlock()
}

// signedSchedule returns the signed envelope of the timetable in force, or
// nil when it came from a local file or there is none.
func (n *Node) signedSchedule() []byte {
	n.tt.signedMu.Lock()
	defer n.tt.signedMu.Unlock()
	return n.tt.signed
}

// trustedKeys returns the configured keys and those in TrustedKeysFile,
// re-reading the file when its modification time changed.
func (n *Node) trustedKeys() [][]byte {
	t := n.tt
	t.keysMu.Lock()
	defer t.keysMu.Unlock()
	if t.keysFile != "" {
		if fi, err := os.Stat(t.keysFile); err == nil && !fi.ModTime().Equal(t.keysMod) {
			keys, err := readKeysFile(t.keysFile)
			if err != nil {
				n.log.Warn("trusted keys file", "file", t.keysFile, "err", err)
			} else {
				t.fileKeys, t.keysMod = keys, fi.ModTime()
			}
		}
	}
	return append(append([][]byte{}, t.fixedKeys...), t.fileKeys...)
}

// readKeysFile reads one public key per line; blank lines and # comments are
// skipped. A bad line is an error naming it.
func readKeysFile(path string) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var keys [][]byte
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		text = strings.TrimSpace(text)
		if text == "" {
			continue
		}
		k, err := schedule.ParsePublicKey(strings.Fields(text)[0])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		keys = append(keys, k)
	}
	return keys, sc.Err()
}

// ReadTrustedKeys reads a trusted-keys file as TrustedKeysFile does, for
// commands that check one before starting a node.
func ReadTrustedKeys(path string) ([][]byte, error) { return readKeysFile(path) }

// describePower fills in what the timetable says of pi's zone now.
func (n *Node) describePower(pi *api.PeerInfo) {
	view := n.tt.view
	s := view.Schedule()
	if s == nil {
		pi.Power = "no timetable"
		return
	}
	now := view.Now()
	switch view.Powered(pi.Zone, now) {
	case schedule.Powered:
		until, next := s.PoweredUntil(pi.Zone, now)
		pi.PoweredUntil = until
		pi.Power = "powered"
		if next == schedule.Dark {
			pi.Power = "powered, cut at " + until.Format("2006-01-02 15:04")
		}
	case schedule.Dark:
		pi.Power = "dark"
	default:
		pi.Power = "unknown"
	}
}
