package ingest

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
)

// CheckZipNames compares every entry's name in a zip's central directory
// with the name in its local header, as Python's zipfile does: no
// checksum covers the directory, and a damaged byte of a name there turns
// an optional file (node-feat.csv.gz, node_feat.npy) into one nobody
// reads, which converts to different data. ra is the zip's bytes.
func CheckZipNames(ra io.ReaderAt, zr *zip.Reader) error {
	for _, f := range zr.File {
		off, err := f.DataOffset()
		if err != nil {
			return fmt.Errorf("entry %q: %w", f.Name, err)
		}
		name := []byte(f.Name)
		// The local header is 30 bytes, the name, then an extra field of
		// its own length, and the data: find it just before the data.
		back := int64(30 + len(name) + 1024)
		start := max(off-back, 0)
		buf := make([]byte, off-start)
		if _, err := ra.ReadAt(buf, start); err != nil {
			return fmt.Errorf("entry %q: local header: %w", f.Name, err)
		}
		found := false
		for p := len(buf) - 30 - len(name); p >= 0; p-- {
			h := buf[p:]
			if binary.LittleEndian.Uint32(h) != 0x04034b50 {
				continue
			}
			nameLen := int(binary.LittleEndian.Uint16(h[26:]))
			extraLen := int(binary.LittleEndian.Uint16(h[28:]))
			if p+30+nameLen+extraLen != len(buf) || nameLen != len(name) {
				continue
			}
			if !bytes.Equal(h[30:30+nameLen], name) {
				return fmt.Errorf("%w: the zip's directory names an entry %q, its local header %q", ErrDamaged, f.Name, h[30:30+nameLen])
			}
			found = true
			break
		}
		if !found {
			return fmt.Errorf("%w: the zip's entry %q has no local header of that name before its data", ErrDamaged, f.Name)
		}
	}
	return nil
}
