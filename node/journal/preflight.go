package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
)

// bbolt's on-disk layout (stable since bbolt file format version 2), as far
// as preflight needs it. Pages start with a 16-byte header: id uint64,
// flags uint16, count uint16, overflow uint32. The two meta pages (0 and 1)
// hold the meta record below; bbolt writes both in native byte order.
const (
	boltMagic        = 0xED0CDAED
	boltVersion      = 2
	pageHeaderSize   = 16
	metaSize         = 64 // magic .. checksum
	metaChecksumAt   = 56
	freelistPageFlag = 0x10
	noFreelist       = ^uint64(0)
)

type boltMeta struct {
	pageSize uint32
	root     uint64
	freelist uint64
	hwm      uint64 // high-water mark: pages [0, hwm) are in use
	txid     uint64
}

// preflight reads the header of the journal file the way bbolt will and
// refuses a file whose header points past its end. bbolt maps the file and
// would read those pages from beyond the end of the mapping; the process
// would then die of SIGBUS or SIGSEGV, which no recover catches. A missing
// or empty file passes (bbolt creates it), and so does a file with no valid
// meta page (bbolt reports that itself).
func preflight(path string) error {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return nil // let bbolt report permission and similar problems
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return nil
	}
	size := uint64(st.Size())
	m, ok := bestMeta(f)
	if !ok {
		return nil
	}
	ps := uint64(m.pageSize)
	switch {
	case ps == 0 || m.hwm > size/ps:
		return fmt.Errorf("file is %d bytes but its header says %d pages of %d bytes (truncated?)", size, m.hwm, ps)
	case m.root >= m.hwm:
		return fmt.Errorf("root page %d is beyond the last page %d", m.root, m.hwm-1)
	case m.freelist == noFreelist:
		return nil
	case m.freelist < 2 || m.freelist >= m.hwm:
		return fmt.Errorf("freelist page %d is outside the file's %d pages", m.freelist, m.hwm)
	}
	var hdr [pageHeaderSize + 8]byte
	if _, err := f.ReadAt(hdr[:], int64(m.freelist*ps)); err != nil {
		return fmt.Errorf("read freelist page %d: %w", m.freelist, err)
	}
	ne := binary.NativeEndian
	flags, count, overflow := ne.Uint16(hdr[8:]), uint64(ne.Uint16(hdr[10:])), uint64(ne.Uint32(hdr[12:]))
	if flags != freelistPageFlag {
		return fmt.Errorf("page %d should be the freelist but has flags %#x", m.freelist, flags)
	}
	if m.freelist+overflow+1 > m.hwm {
		return fmt.Errorf("freelist page %d claims %d overflow pages, past the file's %d pages", m.freelist, overflow, m.hwm)
	}
	if count == 0xFFFF { // the real count is the first element
		count = ne.Uint64(hdr[pageHeaderSize:]) + 1
	}
	if count > ((overflow+1)*ps-pageHeaderSize)/8 {
		return fmt.Errorf("freelist page %d claims %d entries, more than its %d pages hold", m.freelist, count, overflow+1)
	}
	return nil
}

// bestMeta returns the valid meta record with the highest transaction id,
// reading page 0 and page 1 where bbolt would look for them.
func bestMeta(f *os.File) (boltMeta, bool) {
	m0, ok0 := readMeta(f, 0)
	off1 := int64(os.Getpagesize())
	if ok0 {
		off1 = int64(m0.pageSize)
	}
	m1, ok1 := readMeta(f, off1)
	switch {
	case ok0 && ok1:
		if m1.txid > m0.txid {
			return m1, true
		}
		return m0, true
	case ok0:
		return m0, true
	case ok1:
		return m1, true
	}
	return boltMeta{}, false
}

func readMeta(f *os.File, pageOff int64) (boltMeta, bool) {
	var b [metaSize]byte
	if _, err := f.ReadAt(b[:], pageOff+pageHeaderSize); err != nil && !errors.Is(err, io.EOF) {
		return boltMeta{}, false
	}
	ne := binary.NativeEndian
	if ne.Uint32(b[0:]) != boltMagic || ne.Uint32(b[4:]) != boltVersion {
		return boltMeta{}, false
	}
	h := fnv.New64a()
	h.Write(b[:metaChecksumAt])
	if h.Sum64() != ne.Uint64(b[metaChecksumAt:]) {
		return boltMeta{}, false
	}
	return boltMeta{
		pageSize: ne.Uint32(b[8:]),
		root:     ne.Uint64(b[16:]),
		freelist: ne.Uint64(b[32:]),
		hwm:      ne.Uint64(b[40:]),
		txid:     ne.Uint64(b[48:]),
	}, true
}
