package ingest

// Expansion bounds: what an input's compressed streams may inflate to,
// charged as they are read, and spooling under a context.

import (
	"context"
	"io"
	"os"
)

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
