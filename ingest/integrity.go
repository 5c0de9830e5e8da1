package ingest

// Integrity: tracked streams checked at their end (Track, Complete), the
// SHA-256 of every file read, and random access to an entry.

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"sort"
)

// ErrDamaged: an input's own checks failed (a gzip trailer's or a zip
// entry's CRC-32, a stream cut short): its bytes are not the bytes that
// were written, and nothing read from it is used.
var ErrDamaged = errors.New("damaged or truncated")

// Track opens a stream (open opens it from its start, each time it is
// called) and remembers it under key, shown in errors as shown: the
// stream is checked when a read of it returns io.EOF, which the opener's
// reader must return only at its checked end (a gzip trailer, a zip
// entry's CRC-32). Every format opens its bytes through Track (Open,
// OpenDirect and OpenGzip do), so Complete can read what a parser left
// unread.
func (f *Files) Track(key, shown string, open func() (io.ReadCloser, error)) (io.ReadCloser, error) {
	f.mu.Lock()
	st := f.streams[key]
	if st == nil {
		st = &stream{shown: shown, open: open}
		f.streams[key] = st
	}
	f.mu.Unlock()
	rc, err := open()
	if err != nil {
		return nil, err
	}
	return &checkedReader{rc: rc, st: st, f: f}, nil
}

// Complete makes sure every stream opened is checked to its end: one a
// parser stopped reading early (a peek at a first row, an array read to
// its declared shape) is read again to its end now, through its checks.
// The converter calls it before it commits anything, so a damaged byte
// anywhere in an input refuses the conversion, even in a part no parser
// needed.
func (f *Files) Complete(ctx context.Context) error {
	f.mu.Lock()
	var todo []*stream
	keys := make([]string, 0, len(f.streams))
	for k := range f.streams {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if st := f.streams[k]; !st.verified {
			todo = append(todo, st)
		}
	}
	f.mu.Unlock()
	for _, st := range todo {
		rc, err := st.open()
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, ctxReader{ctx, rc})
		rc.Close()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return containerErr(st.shown, "%v: %v", ErrDamaged, err)
		}
		f.mu.Lock()
		st.verified = true
		f.mu.Unlock()
	}
	return nil
}

// checkedReader marks its stream checked when a read returns io.EOF, and
// says of any other error that the input is damaged.
type checkedReader struct {
	rc io.ReadCloser
	st *stream
	f  *Files
}

func (r *checkedReader) Read(p []byte) (int, error) {
	if err := ctxErr(r.f.ctx); err != nil {
		// Cancelled (SIGTERM): every parser stops at its next read, in
		// the middle of a graph as well as between two.
		return 0, err
	}
	n, err := r.rc.Read(p)
	switch {
	case err == io.EOF:
		r.f.mu.Lock()
		r.st.verified = true
		r.f.mu.Unlock()
	case err != nil && !errors.Is(err, ErrDamaged) && !errors.Is(err, ErrFormat) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded):
		err = fmt.Errorf("%w: %v", ErrDamaged, err)
	}
	return n, err
}

func (r *checkedReader) Close() error { return r.rc.Close() }

// OpenRandom opens entry for random access, for a format whose file is
// itself an archive or indexed from its end (a NumPy .npz is a zip, a
// Parquet file has its footer last). An entry already on disk (in a
// folder, or spooled from a tar) is read in place; any other (a zip's
// entry) is copied to an unlinked temporary file first (in the spool
// folder, beside the output). The entry is read once to its end on the
// way, so its SHA-256 is recorded as by Open and its checks are made.
func (f *Files) OpenRandom(entry, shown string) (*os.File, int64, error) {
	rc, err := f.OpenDirect(entry, shown)
	if err != nil {
		return nil, 0, err
	}
	hr := rc.(*checkedReader).rc.(*hashingReader)
	if fh, ok := hr.rc.(*os.File); ok {
		n, err := io.Copy(io.Discard, rc)
		if err != nil {
			fh.Close()
			return nil, 0, containerErr(shown, "read: %v", err)
		}
		return fh, n, nil
	}
	defer rc.Close()
	tmp, err := f.TempFile()
	if err != nil {
		return nil, 0, fmt.Errorf("ingest: %s: %w", shown, err)
	}
	n, err := io.Copy(tmp, rc)
	if err != nil {
		tmp.Close()
		var fe *FormatError
		if errors.As(err, &fe) {
			return nil, 0, err
		}
		return nil, 0, containerErr(shown, "read: %v", err)
	}
	return tmp, n, nil
}

// Hashes returns the SHA-256 of every file read to the end, sorted by name.
func (f *Files) Hashes() []SourceHash {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]SourceHash, 0, len(f.hashes))
	for _, h := range f.hashes {
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

type hashingReader struct {
	rc   io.ReadCloser
	h    hash.Hash
	n    int64
	name string
	f    *Files
	done bool
}

func (r *hashingReader) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	r.h.Write(p[:n])
	r.n += int64(n)
	if err == io.EOF && !r.done {
		r.done = true
		r.f.mu.Lock()
		r.f.hashes[r.name] = SourceHash{Name: r.name, Bytes: r.n, SHA256: hex.EncodeToString(r.h.Sum(nil))}
		r.f.mu.Unlock()
	}
	return n, err
}

func (r *hashingReader) Close() error { return r.rc.Close() }
