package member

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// ReadPeerList reads a peer list file: one peer ID per line (the first
// word of the line), blank lines and # comments skipped. A bad line is an
// error naming FILE:LINE.
func ReadPeerList(path string) (map[peer.ID]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read peer list: %w", err)
	}
	defer f.Close()
	ids := map[peer.ID]bool{}
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		fields := strings.Fields(text)
		if len(fields) == 0 {
			continue
		}
		id, err := peer.Decode(fields[0])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %q is not a peer ID (expected e.g. 12D3KooW...)", path, line, fields[0])
		}
		ids[id] = true
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return ids, nil
}

// listFile is a peer list file re-read when its modification time or size
// changes. It is not safe for concurrent use: Gate guards it.
type listFile struct {
	path string
	mod  time.Time
	size int64
	ids  map[peer.ID]bool
}

// load reads the file if it changed since the last read and reports whether
// it did. On error the previous list stays in force.
func (l *listFile) load() (bool, error) {
	fi, err := os.Stat(l.path)
	if err != nil {
		return false, fmt.Errorf("peer list: %w", err)
	}
	if l.ids != nil && fi.ModTime().Equal(l.mod) && fi.Size() == l.size {
		return false, nil
	}
	ids, err := ReadPeerList(l.path)
	if err != nil {
		return false, err
	}
	l.ids, l.mod, l.size = ids, fi.ModTime(), fi.Size()
	return true, nil
}
