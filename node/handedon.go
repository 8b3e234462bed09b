package node

import (
	"strings"
	"sync"
	"time"

	"github.com/bedwe/bedwe/node/journal"
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

// handedOnEntry is how a remembered attempt ended here.
type handedOnEntry struct {
	at         time.Time
	superseded bool
}

func newHandedOnSet() *handedOnSet { return &handedOnSet{at: map[string]handedOnEntry{}} }

// add records how key ended at t.
func (h *handedOnSet) add(key string, t time.Time, superseded bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.at[key] = handedOnEntry{at: t, superseded: superseded}
}

// ended reports whether key ended here, and whether it was superseded.
func (h *handedOnSet) ended(key string) (ended, superseded bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.at[key]
	return ok, e.superseded
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

// supersededMark prefixes the journaled time of a superseded attempt.
const supersededMark = "superseded "

// putHandedOn adds key to the journal's handed-on set in tx.
func putHandedOn(tx *journal.Tx, key string, t time.Time, superseded bool) error {
	v := t.UTC().Format(time.RFC3339Nano)
	if superseded {
		v = supersededMark + v
	}
	return tx.Put(journal.BucketHandedOn, key, []byte(v))
}

// loadHandedOn reads the journal's handed-on set.
func (n *Node) loadHandedOn() error {
	return n.journal.ForEach(journal.BucketHandedOn, func(key string, value []byte) error {
		v, superseded := strings.CutPrefix(string(value), supersededMark)
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			t = time.Now() // unreadable time: keep it one more memory
		}
		n.handedOn.add(key, t, superseded)
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
