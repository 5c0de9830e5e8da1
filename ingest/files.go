package ingest

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/ulikunitz/xz"

	"github.com/augloader/augloader/internal/iox"
)

// Files is an input's files, wherever they are: a folder (listed to
// MaxDepth levels), a .zip, a .tar, .tar.gz or .tar.xz (recognised by
// content, not by name; the entries a format wants streamed once into a
// spool folder, never held in memory), or one bare file. Entries are named
// by their path inside the container, with '/' ("raw/edge.csv.gz"); a bare
// file's one entry is its base name. Reading an entry to its end records
// its SHA-256 (Hashes).
type Files struct {
	Path string // the input as given
	// Bare: the input is one plain file, not a container.
	Bare bool
	// Magic is a bare file's first bytes (at most 512), for Detect.
	Magic []byte

	entries []string
	open    map[string]func() (io.ReadCloser, error)
	closers []func() error

	mu     sync.Mutex
	hashes map[string]SourceHash
}

// SourceHash is the SHA-256 of one input file, computed while it was read.
type SourceHash struct {
	Name   string
	Bytes  int64
	SHA256 string
}

// FilesOptions tune OpenFiles.
type FilesOptions struct {
	// SpoolDir is where a tar archive's entries are written while it is
	// read (default: the system's temporary folder). The spool is removed
	// by Close, and by a later OpenFiles when its process was killed.
	SpoolDir string
	// Wanted says which tar entries to spool (the formats' files); nil:
	// every regular entry.
	Wanted func(entry string) bool
}

// Listing bounds: a folder is listed this deep and no further, and an
// input holds at most MaxEntries files (a home folder given by mistake is
// refused, not walked).
const (
	MaxDepth   = 4
	MaxEntries = 100_000
)

// containerErr is a container fault, not any format's.
func containerErr(p, detail string, args ...any) error {
	return Errorf("input", p, 0, 0, detail, args...)
}

// OpenFiles opens an input: a folder, a zip, a tar (plain, gzip, xz) or a
// bare file.
func OpenFiles(p string, o FilesOptions) (*Files, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	f := &Files{Path: p, open: map[string]func() (io.ReadCloser, error){}, hashes: map[string]SourceHash{}}
	if st.IsDir() {
		if err := f.listFolder(p); err != nil {
			return nil, err
		}
		return f, nil
	}
	if !st.Mode().IsRegular() {
		// A FIFO or a device would block open or read forever (and a
		// zip needs random access): only regular files are read.
		return nil, containerErr(p, "not a regular file (%s): give a folder or a file", st.Mode().Type())
	}
	head, err := readHead(p)
	if err != nil {
		return nil, err
	}
	switch {
	case bytes.HasPrefix(head, []byte("PK\x03\x04")), bytes.HasPrefix(head, []byte("PK\x05\x06")):
		err = f.openZip(p)
	case bytes.HasPrefix(head, []byte{0x1f, 0x8b}):
		err = f.openTar(p, "gzip", o)
	case bytes.HasPrefix(head, []byte{0xfd, '7', 'z', 'X', 'Z', 0}):
		err = f.openTar(p, "xz", o)
	case len(head) >= 263 && string(head[257:262]) == "ustar":
		err = f.openTar(p, "tar", o)
	default:
		f.Bare, f.Magic = true, head
		name := filepath.Base(p)
		f.entries = []string{name}
		f.open[name] = func() (io.ReadCloser, error) { return os.Open(p) }
		return f, nil
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func readHead(p string) ([]byte, error) {
	fh, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	defer fh.Close()
	b := make([]byte, 512)
	n, _ := io.ReadFull(fh, b)
	return b[:n], nil
}

// skipped: entries no format reads (macOS resource forks and folders).
func skipped(name string) bool {
	b := path.Base(name)
	return strings.HasPrefix(b, "._") || strings.Contains(name, "__MACOSX")
}

// listFolder lists dir's regular files to MaxDepth levels (hidden folders
// skipped, links never followed).
func (f *Files) listFolder(dir string) error {
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			if p != dir && (strings.HasPrefix(d.Name(), ".") || strings.Count(rel, string(filepath.Separator)) >= MaxDepth-1) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		name := filepath.ToSlash(rel)
		if skipped(name) {
			return nil
		}
		if len(f.entries) >= MaxEntries {
			return containerErr(dir, "more than %d files: give the dataset's own folder", MaxEntries)
		}
		f.entries = append(f.entries, name)
		f.open[name] = func() (io.ReadCloser, error) { return os.Open(p) }
		return nil
	})
	sort.Strings(f.entries)
	if err != nil {
		var fe *FormatError
		if errors.As(err, &fe) {
			return err
		}
		return fmt.Errorf("ingest: %w", err)
	}
	return nil
}

func (f *Files) openZip(p string) error {
	zr, err := zip.OpenReader(p)
	if err != nil {
		return containerErr(p, "not a readable zip: %v", err)
	}
	f.closers = append(f.closers, zr.Close)
	for _, e := range zr.File {
		if e.FileInfo().IsDir() || skipped(e.Name) {
			continue
		}
		if f.open[e.Name] != nil {
			return containerErr(p, "the zip holds %q twice: refusing to guess which one is the dataset", e.Name)
		}
		if len(f.entries) >= MaxEntries {
			return containerErr(p, "more than %d entries", MaxEntries)
		}
		e := e
		f.entries = append(f.entries, e.Name)
		f.open[e.Name] = func() (io.ReadCloser, error) { return e.Open() }
	}
	sort.Strings(f.entries)
	return nil
}

// openTar reads a tar (kind "tar", "gzip" or "xz" around one) in a single
// streaming pass, writing the entries o.Wanted takes into a spool folder
// under their own paths. Nothing of the archive is held in memory; the
// spool is removed by Close.
func (f *Files) openTar(p, kind string, o FilesOptions) error {
	fh, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	defer fh.Close()
	var r io.Reader = bufio.NewReaderSize(fh, 1<<20)
	switch kind {
	case "gzip":
		zr, err := gzip.NewReader(r)
		if err != nil {
			return containerErr(p, "gzip: %v", err)
		}
		defer zr.Close()
		r = zr
	case "xz":
		xr, err := xz.NewReader(r)
		if err != nil {
			return containerErr(p, "xz: %v", err)
		}
		r = xr
	}
	dir := o.SpoolDir
	if dir == "" {
		dir = os.TempDir()
	}
	td, err := iox.NewTempDir(filepath.Join(dir, "augloader-spool-"+filepath.Base(p)))
	if err != nil {
		return fmt.Errorf("ingest: spool for %s: %w", p, err)
	}
	f.closers = append(f.closers, func() error { td.Abort(); return nil })
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return containerErr(p, "not a readable tar: %v", err)
		}
		if h.Typeflag != tar.TypeReg {
			continue // folders, links and devices are never followed
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if skipped(name) || (o.Wanted != nil && !o.Wanted(name)) {
			continue
		}
		if path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			continue // never written outside the spool
		}
		if f.open[name] != nil {
			return containerErr(p, "the archive holds %q twice: refusing to guess which one is the dataset", name)
		}
		if len(f.entries) >= MaxEntries {
			return containerErr(p, "more than %d entries", MaxEntries)
		}
		dst := filepath.Join(td.Path, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return fmt.Errorf("ingest: spool: %w", err)
		}
		if err := spool(dst, tr); err != nil {
			return containerErr(p, "%s: %v", h.Name, err)
		}
		f.entries = append(f.entries, name)
		f.open[name] = func() (io.ReadCloser, error) { return os.Open(dst) }
	}
	sort.Strings(f.entries)
	return nil
}

func spool(dst string, r io.Reader) error {
	fh, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(fh, r)
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	return err
}

// Entries lists the input's files, sorted.
func (f *Files) Entries() []string { return f.entries }

// Has reports whether the input holds entry.
func (f *Files) Has(entry string) bool { return f.open[entry] != nil }

// Close releases an archive and removes a tar's spool.
func (f *Files) Close() error {
	var err error
	for _, c := range f.closers {
		if cerr := c(); err == nil {
			err = cerr
		}
	}
	f.closers = nil
	return err
}

// Open opens entry; reading it to its end records its SHA-256 under the
// name shown (see Hashes). A goroutine reads and hashes one block ahead of
// the caller.
func (f *Files) Open(entry, shown string) (io.ReadCloser, error) {
	rc, err := f.OpenDirect(entry, shown)
	if err != nil {
		return nil, err
	}
	return newPrefetcher(rc), nil
}

// OpenDirect is Open without the read-ahead, for a caller that reads on a
// goroutine of its own: one copy of the bytes fewer.
func (f *Files) OpenDirect(entry, shown string) (io.ReadCloser, error) {
	op := f.open[entry]
	if op == nil {
		return nil, containerErr(shown, "missing required file")
	}
	rc, err := op()
	if err != nil {
		return nil, containerErr(shown, "cannot open: %v", err)
	}
	return &hashingReader{rc: rc, h: sha256.New(), name: shown, f: f}, nil
}

// OpenRandom opens entry for random access, for a format whose file is
// itself an archive or indexed from its end (a NumPy .npz is a zip, a
// Parquet file has its footer last). An entry already on disk (in a
// folder, or spooled from a tar) is read in place; any other (a zip's
// entry) is copied to an unlinked temporary file first. The entry is read
// once to its end on the way, so its SHA-256 is recorded as by Open.
func (f *Files) OpenRandom(entry, shown string) (*os.File, int64, error) {
	rc, err := f.OpenDirect(entry, shown)
	if err != nil {
		return nil, 0, err
	}
	hr := rc.(*hashingReader)
	if fh, ok := hr.rc.(*os.File); ok {
		n, err := io.Copy(io.Discard, hr)
		if err != nil {
			fh.Close()
			return nil, 0, containerErr(shown, "read: %v", err)
		}
		return fh, n, nil
	}
	defer hr.Close()
	tmp, err := os.CreateTemp("", "augloader-entry-*")
	if err != nil {
		return nil, 0, fmt.Errorf("ingest: %s: %w", shown, err)
	}
	os.Remove(tmp.Name()) // gone with the last descriptor, however the process ends
	n, err := io.Copy(tmp, hr)
	if err != nil {
		tmp.Close()
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

// ReadAhead reads src on a goroutine of its own, one block ahead of the
// caller: a reader of a compressed entry (OpenDirect under a decompressor)
// moves the inflating off the parser's goroutine, and several files read
// together inflate on as many cores.
func ReadAhead(src io.ReadCloser) io.ReadCloser { return newPrefetcher(src) }

// prefetcher reads (and so hashes) its source in a goroutine, one block
// ahead of the parser: on two cores, reading and SHA-256 overlap parsing.
type prefetcher struct {
	src    io.ReadCloser
	full   chan block
	free   chan []byte
	stop   chan struct{}
	done   chan struct{}
	cur    []byte
	curBuf []byte
	err    error
}

type block struct {
	buf []byte
	n   int
	err error
}

const prefetchBlock = 1 << 20

func newPrefetcher(src io.ReadCloser) *prefetcher {
	p := &prefetcher{
		src: src, full: make(chan block, 2), free: make(chan []byte, 3),
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	for range 3 {
		p.free <- make([]byte, prefetchBlock)
	}
	go p.run()
	return p
}

func (p *prefetcher) run() {
	defer close(p.done)
	for {
		var buf []byte
		select {
		case buf = <-p.free:
		case <-p.stop:
			return
		}
		n, err := io.ReadFull(p.src, buf)
		if err == io.ErrUnexpectedEOF {
			err = io.EOF
		}
		select {
		case p.full <- block{buf: buf, n: n, err: err}:
		case <-p.stop:
			return
		}
		if err != nil {
			return
		}
	}
}

func (p *prefetcher) Read(b []byte) (int, error) {
	for len(p.cur) == 0 {
		if p.err != nil {
			return 0, p.err
		}
		if p.curBuf != nil {
			p.free <- p.curBuf
			p.curBuf = nil
		}
		blk := <-p.full
		p.cur, p.curBuf, p.err = blk.buf[:blk.n], blk.buf, blk.err
	}
	n := copy(b, p.cur)
	p.cur = p.cur[n:]
	return n, nil
}

func (p *prefetcher) Close() error {
	close(p.stop)
	<-p.done
	return p.src.Close()
}
