package ingest

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
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

	entries  []string
	open     map[string]func() (io.ReadCloser, error)
	closers  []func() error
	spoolDir string
	limit    Expansion
	ctx      context.Context // nil: never done
	// inputBytes is the input's size on disk; inflated the bytes its
	// compressed streams gave (per stream the most any one read of it
	// gave, so a file read twice counts once), held to
	// limit.Bound(inputBytes).
	inputBytes int64
	inflated   int64
	inflatedBy map[string]int64

	mu     sync.Mutex
	hashes map[string]SourceHash
	// streams: every stream a format opened (a raw entry, an inflated
	// gzip member, a nested archive's entry), by key, and whether one of
	// its reads reached its checked end (Complete).
	streams map[string]*stream
}

// stream is one checked stream: how to open it again, and whether a read
// of it reached its end with every check passed (a gzip trailer's CRC-32
// and size, a zip entry's CRC-32).
type stream struct {
	shown    string
	open     func() (io.ReadCloser, error)
	verified bool
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
	// MaxExpansion bounds what a compressed archive may inflate to
	// (zero: DefaultExpansion).
	MaxExpansion Expansion
	// Context, when set, stops a long read (a tar spooled) when it is
	// done.
	Context context.Context
}

func (o FilesOptions) expansion() Expansion {
	if o.MaxExpansion.Ratio <= 0 {
		return DefaultExpansion
	}
	return o.MaxExpansion
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
	f := &Files{Path: p, open: map[string]func() (io.ReadCloser, error){}, hashes: map[string]SourceHash{},
		streams: map[string]*stream{}, spoolDir: o.SpoolDir, limit: o.expansion(), ctx: o.Context,
		inputBytes: st.Size(), inflatedBy: map[string]int64{}}
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
		f.open[name] = func() (io.ReadCloser, error) { return iox.OpenRegular(p) }
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
		if info, err := d.Info(); err == nil {
			f.inputBytes += info.Size()
		}
		f.entries = append(f.entries, name)
		f.open[name] = func() (io.ReadCloser, error) { return iox.OpenRegular(p) }
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
	fh, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	err = CheckZipNames(fh, &zr.Reader)
	fh.Close()
	if err != nil {
		return containerErr(p, "%v", err)
	}
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
		f.open[e.Name] = func() (io.ReadCloser, error) { return f.GuardZipEntry(e, p+"/"+e.Name) }
	}
	sort.Strings(f.entries)
	return nil
}

// openTar reads a tar (kind "tar", "gzip" or "xz" around one) in a single
// streaming pass, writing the entries o.Wanted takes into a spool folder
// under their own paths. Nothing of the archive is held in memory; the
// spool is removed by Close. The compressed stream is read to its end
// (its trailer's checks made), and what it inflates to is charged to the
// input's Expansion bound.
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
	guard := &expansionGuard{r: r, f: f, key: "tar:" + p, shown: p}
	end := &endReader{r: guard}
	tr := tar.NewReader(end)
	for {
		if err := ctxErr(f.ctx); err != nil {
			return err
		}
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			if end.atEOF {
				// Go's tar reader takes the end of its input at a header
				// for the end of the archive; a tar ends with two zero
				// blocks, and one without them was cut short.
				return containerErr(p, "%v: the tar ends without its end-of-archive blocks (cut short?)", ErrDamaged)
			}
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
		if err := spool(f.ctx, dst, tr); err != nil {
			var fe *FormatError
			if errors.As(err, &fe) || errors.Is(err, context.Canceled) {
				return err
			}
			return containerErr(p, "%s: %v", h.Name, err)
		}
		f.entries = append(f.entries, name)
		f.open[name] = func() (io.ReadCloser, error) { return iox.OpenRegular(dst) }
	}
	// The tar ends before its compressed stream does (its last record's
	// padding, the gzip trailer or the xz index): read it to the end, so a
	// file cut there is refused too.
	if kind != "tar" {
		if _, err := io.Copy(io.Discard, guard); err != nil {
			var fe *FormatError
			if errors.As(err, &fe) {
				return err
			}
			return containerErr(p, "%v after the tar's last entry (%s): %v", ErrDamaged, kind, err)
		}
	}
	if kind == "xz" {
		if err := xzFooter(p); err != nil {
			return containerErr(p, "%v: %v", ErrDamaged, err)
		}
	}
	sort.Strings(f.entries)
	return nil
}

// endReader says whether the last read of its source returned io.EOF
// with nothing: the tar reader asked for a header and got the end of its
// input.
type endReader struct {
	r     io.Reader
	atEOF bool
}

func (e *endReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	e.atEOF = n == 0 && err == io.EOF
	return n, err
}

// xzFooter checks that the .xz file at p ends with a stream footer (after
// any stream padding): its CRC-32 and its magic. The xz package returns a
// clean end of file when a stream is cut right after a block, before its
// index and footer.
func xzFooter(p string) error {
	fh, err := os.Open(p)
	if err != nil {
		return err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return err
	}
	end := st.Size()
	var tail [12]byte
	for {
		if end < 12 {
			return errors.New("xz: no stream footer")
		}
		if _, err := fh.ReadAt(tail[:], end-12); err != nil {
			return err
		}
		if end%4 == 0 && bytes.Equal(tail[8:], []byte{0, 0, 0, 0}) {
			end -= 4 // stream padding
			continue
		}
		break
	}
	if string(tail[10:]) != "YZ" || crc32.ChecksumIEEE(tail[4:10]) != binary.LittleEndian.Uint32(tail[:4]) {
		return errors.New("xz: the file does not end with a stream footer (cut short?)")
	}
	return nil
}

// GuardZipEntry opens a zip entry (the input's own, or a nested
// archive's: an .npz array, a torch.save storage) bounded in what it
// inflates to: an entry that declares more than the input's bound allows
// is refused before it is read, and one that inflates past it (its
// declared size is checked only at its end) as it does.
func (f *Files) GuardZipEntry(e *zip.File, shown string) (io.ReadCloser, error) {
	if e.Method != zip.Store {
		f.mu.Lock()
		left := f.limit.Bound(f.inputBytes) - f.inflated + f.inflatedBy["zip:"+shown]
		f.mu.Unlock()
		if int64(e.UncompressedSize64) > left {
			return nil, f.overInflated(shown, int64(e.UncompressedSize64))
		}
	}
	rc, err := e.Open()
	if err != nil {
		return nil, err
	}
	if e.Method == zip.Store {
		return rc, nil
	}
	return struct {
		io.Reader
		io.Closer
	}{&expansionGuard{r: rc, f: f, key: "zip:" + shown, shown: shown}, rc}, nil
}

// Expansion bounds what an input's compressed streams (gzip files, zip
// entries, a tar's compression, Parquet's encodings) may inflate to, all
// together: at most Ratio times the input's bytes on disk, and never less
// than Floor. Real datasets inflate far less as a whole (the TU COLLAB
// .tar.xz 37 times, REDDIT-BINARY.zip 5 times, though its graph indicator
// alone 385 times); a few kilobytes that claim gigabytes are refused,
// naming the file and the flag that raises the bound.
type Expansion struct {
	Ratio int64
	Floor int64
}

// Bound is what an input of size bytes may inflate to.
func (e Expansion) Bound(size int64) int64 {
	if e.Ratio > 0 && size > (1<<62)/e.Ratio {
		return 1 << 62
	}
	return max(e.Floor, e.Ratio*size)
}

// DefaultExpansion is the bound unless the caller sets another.
var DefaultExpansion = Expansion{Ratio: 100, Floor: 8 << 20}

// inflate records that the stream key has given n bytes in one read;
// past the input's bound it returns the error naming shown.
func (f *Files) inflate(key, shown string, n int64) error {
	f.mu.Lock()
	if hw := f.inflatedBy[key]; n > hw {
		f.inflated += n - hw
		f.inflatedBy[key] = n
	}
	over := f.inflated > f.limit.Bound(f.inputBytes)
	f.mu.Unlock()
	if over {
		return f.overInflated(shown, n)
	}
	return nil
}

func (f *Files) overInflated(shown string, n int64) error {
	return containerErr(shown, "inflates to %d bytes: with the rest, more than %d times the input's %d bytes (a decompression bomb, or a dataset that needs shardconv convert --max-expansion raised)",
		n, f.limit.Ratio, f.inputBytes)
}

// expansionGuard reads r, the inflated stream key, charging what it
// gives to its Files.
type expansionGuard struct {
	r     io.Reader
	f     *Files
	key   string
	n     int64
	shown string
}

func (g *expansionGuard) Read(p []byte) (int, error) {
	n, err := g.r.Read(p)
	g.n += int64(n)
	if ierr := g.f.inflate(g.key, g.shown, g.n); ierr != nil {
		return n, ierr
	}
	return n, err
}

func spool(ctx context.Context, dst string, r io.Reader) error {
	fh, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(fh, ctxReader{ctx, r})
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	return err
}

// ctxReader reads r until ctx is done (nil: never): a long copy stops at
// its next read once SIGTERM cancels the context.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := ctxErr(c.ctx); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

func ctxErr(ctx context.Context) error {
	if ctx == nil {
		return nil
	}
	return ctx.Err()
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
	return f.Track("file:"+shown, shown, func() (io.ReadCloser, error) {
		rc, err := op()
		if err != nil {
			return nil, containerErr(shown, "cannot open: %v", err)
		}
		return &hashingReader{rc: rc, h: sha256.New(), name: shown, f: f}, nil
	})
}

// OpenGzip opens entry, a gzip file, inflated: every member is read to its
// trailer, whose CRC-32 and size are checked, and a read ends in io.EOF
// only there (a file cut short is an error, never a shorter file). A
// goroutine inflates one block ahead of the caller.
func (f *Files) OpenGzip(entry, shown string) (io.ReadCloser, error) {
	rc, err := f.Track("gzip:"+shown, shown, func() (io.ReadCloser, error) {
		raw, err := f.OpenDirect(entry, shown)
		if err != nil {
			return nil, err
		}
		zr, err := gzip.NewReader(raw)
		if err != nil {
			raw.Close()
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, containerErr(shown, "%v: a gzip file cut short", ErrDamaged)
			}
			return nil, containerErr(shown, "not gzip: %v", err)
		}
		return &gzFile{Reader: zr, guard: &expansionGuard{r: zr, f: f, key: "gzip:" + shown, shown: shown}, raw: raw}, nil
	})
	if err != nil {
		return nil, err
	}
	return newPrefetcher(rc), nil
}

type gzFile struct {
	*gzip.Reader
	guard *expansionGuard
	raw   io.Closer
}

func (g *gzFile) Read(p []byte) (int, error) { return g.guard.Read(p) }

func (g *gzFile) Close() error {
	err := g.Reader.Close()
	if cerr := g.raw.Close(); err == nil {
		err = cerr
	}
	return err
}

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

// Limit is the bound on what the input's compressed streams may inflate
// to, and the input's size it applies to.
func (f *Files) Limit() (Expansion, int64) { return f.limit, f.inputBytes }

// TempFile creates an unlinked temporary file in the spool folder (beside
// the output: a temporary folder may be memory), gone with its last
// descriptor however the process ends.
func (f *Files) TempFile() (*os.File, error) {
	tmp, err := os.CreateTemp(f.spoolDir, ".augloader-entry-*")
	if err != nil {
		return nil, err
	}
	os.Remove(tmp.Name())
	return tmp, nil
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
// Its source's errors reach the parser unchanged: io.EOF only where the
// source said io.EOF (a decompressor's io.ErrUnexpectedEOF, a file cut
// short, stays an error).
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

// fill reads into buf until it is full or the source returns an error,
// which it returns as the source gave it (io.ReadFull would turn a short
// last block's io.EOF into io.ErrUnexpectedEOF, and the two must stay
// apart).
func fill(src io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		k, err := src.Read(buf[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
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
		n, err := fill(p.src, buf)
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
