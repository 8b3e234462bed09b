package node

import (
	"strings"
	"sync"
	"time"

	"github.com/bedwe/bedwe/node/journal"
	"github.com/bedwe/bedwe/pack"
)

// handedOnMemory is how long a holder remembers work it ran and handed on.
// A sender that missed the ack hands the same attempt again within
// seconds to minutes (its retries, or a taken refusal naming this peer);
// the memory outlives that by far, and is pruned with the retention.
const handedOnMemory = cancelMemory

// handedOnSet remembers the held keys (workflow, step path, attempt) of
// work this peer ran and handed on, or dropped as superseded. A hand-off
// of the same attempt that arrives after the record was dropped — the
// sender's ack was lost and it tried again, or a second receiver refused
// it naming this peer (node/guard G8, join J6 and J8) — is answered as
// taken and not run again (I2), or refused as superseded when a guardian
// re-routed it meanwhile (I1). The set is journaled with the drop of the
// record (journal.BucketHandedOn), in the same transaction, so a restart
// keeps it.
type handedOnSet struct {
	mu sync.Mutex
	at map[string]handedOnEntry
}

// handedOnEntry is how a remembered attempt ended here, and the chain
// it belonged to (pack.Lineage): the same step and attempt handed here by
// another chain is not the one remembered (issue 12, "Left undone" 7).
type handedOnEntry struct {
	at         time.Time
	superseded bool
	lineage    pack.Lineage
}

func newHandedOnSet() *handedOnSet { return &handedOnSet{at: map[string]handedOnEntry{}} }

// add records how key, of the chain lineage, ended at t.
func (h *handedOnSet) add(key string, t time.Time, superseded bool, lineage pack.Lineage) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.at[key] = handedOnEntry{at: t, superseded: superseded, lineage: lineage}
}

// ended reports whether key ended here and how.
func (h *handedOnSet) ended(key string) (handedOnEntry, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.at[key]
	return e, ok
}

// expire forgets keys handed on before cut and returns them.
func (h *handedOnSet) expire(cut time.Time) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for k, e := range h.at {
		if e.at.Before(cut) {
			out = append(out, k)
			delete(h.at, k)
		}
	}
	return out
}

// supersededMark prefixes the journaled time of a superseded attempt, and
// lineageMark the chain's lineage after it: "[superseded ]TIME[ lineage=L]".
const (
	supersededMark = "superseded "
	lineageMark    = " lineage="
)

// putHandedOn adds key, of the chain lineage, to the journal's handed-on
// set in tx.
func putHandedOn(tx *journal.Tx, key string, t time.Time, superseded bool, lineage pack.Lineage) error {
	v := t.UTC().Format(time.RFC3339Nano)
	if superseded {
		v = supersededMark + v
	}
	if l := lineage.String(); l != "" {
		v += lineageMark + l
	}
	return tx.Put(journal.BucketHandedOn, key, []byte(v))
}

// loadHandedOn reads the journal's handed-on set.
func (n *Node) loadHandedOn() error {
	return n.journal.ForEach(journal.BucketHandedOn, func(key string, value []byte) error {
		v, superseded := strings.CutPrefix(string(value), supersededMark)
		v, lin, _ := strings.Cut(v, lineageMark)
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			t = time.Now() // unreadable time: keep it one more memory
		}
		lineage, err := pack.ParseLineage(lin)
		if err != nil {
			n.log.Warn("handed-on memory: unreadable lineage, read as the first chain", "key", key, "err", err)
		}
		n.handedOn.add(key, t, superseded, lineage)
		return nil
	})
}

// pruneHandedOn forgets what was handed on before cut, in one transaction.
func (n *Node) pruneHandedOn(cut time.Time) (int, error) {
	keys := n.handedOn.expire(cut)
	if len(keys) == 0 {
		return 0, nil
	}
	err := n.journal.Update(func(tx *journal.Tx) error {
		for _, k := range keys {
			if err := tx.Delete(journal.BucketHandedOn, k); err != nil {
				return err
			}
		}
		return nil
	})
	return len(keys), err
}

// unsettledSet remembers the held keys this peer refused as unsettled
// (api.CodeUnsettled) and did not take since: it registered as the
// successor with some guardians of the step before, then refused. The
// sender may end up guarding this peer for that attempt (it could not
// hand the step to it again within UnsettledGiveUp); a guardian that asks
// is told this peer never took it (api.GuardReply.NeverTook), not that it
// moved on — or the guardian drops its copy and the step is lost
// (reliability-core "Left undone" 6). Kept in memory, for handedOnMemory:
// after a restart the answer is "released" again, as before.
type unsettledSet struct {
	mu sync.Mutex
	at map[string]time.Time
}

func newUnsettledSet() *unsettledSet { return &unsettledSet{at: map[string]time.Time{}} }

// add remembers that key was refused as unsettled at t.
func (u *unsettledSet) add(key string, t time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.at[key] = t
}

// remove forgets key (it was taken after all).
func (u *unsettledSet) remove(key string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.at, key)
}

// has reports whether key was refused as unsettled and not taken since.
func (u *unsettledSet) has(key string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	_, ok := u.at[key]
	return ok
}

// expire forgets keys refused before cut and returns how many.
func (u *unsettledSet) expire(cut time.Time) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for k, t := range u.at {
		if t.Before(cut) {
			delete(u.at, k)
			n++
		}
	}
	return n
}
