package shard_test

// What a page read checks under a cache limit (page and file checksums, a
// forged buffer length) and that Close waits for what the reader started.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/shard"
)

// Under a cache limit every byte a page is decoded from is checked. In a
// folder without page maps (written before them), a shard damaged before
// its first read fails its file checksum (the scan that indexes its
// pages), and one damaged after fails the page's own checksum when that
// page is read again; the other pages are served. (With page maps:
// TestPageMapDamagedPage.)
func TestPagesChecked(t *testing.T) {
	src := withoutPageMap(t, fixture.SynthShardsSized(t, "COLLAB", 2000, 3, 64<<20))
	man, err := shard.ReadManifest(src)
	if err != nil {
		t.Fatal(err)
	}
	if len(man.Shards) != 1 || len(man.Shards[0].Batches) < 3 {
		t.Fatalf("want one shard of several pages, got %d shards, %v", len(man.Shards), man.Shards[0].Batches)
	}
	file := man.Shards[0].File
	flip := func(dir string, at int64) {
		t.Helper()
		f, err := os.OpenFile(filepath.Join(dir, file), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var b [1]byte
		if _, err := f.ReadAt(b[:], at); err != nil {
			t.Fatal(err)
		}
		b[0] ^= 0x10
		if _, err := f.WriteAt(b[:], at); err != nil {
			t.Fatal(err)
		}
	}
	mid := man.Shards[0].Bytes / 2

	t.Run("before the first read", func(t *testing.T) {
		dir := copyDir(t, src)
		flip(dir, mid)
		r, err := shard.Open(context.Background(), dir, shard.WithCacheLimit(1<<30))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		_, _, err = r.Pin(context.Background(), 0)
		var ce *shard.CorruptionError
		if !errors.As(err, &ce) || ce.File != file || ce.Field != "checksum" {
			t.Fatalf("pin of a damaged shard: %v", err)
		}
	})
	// openCopy copies the folder and reads it by pages, shard 0 scanned.
	openCopy := func(t *testing.T) (string, *shard.Reader) {
		dir := copyDir(t, src)
		r, err := shard.Open(context.Background(), dir, shard.WithCacheLimit(16<<20))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		if err := pin(r, 0); err != nil {
			t.Fatal(err)
		}
		return dir, r
	}
	t.Run("after the first read", func(t *testing.T) {
		dir, r := openCopy(t)
		// A byte in a page past the first changes; each page is then read
		// (page 0 again once the others have taken its room).
		flip(dir, mid)
		var bad []int
		for p := range r.NumPages() {
			first, _ := r.PageGraphs(p)
			err := pin(r, first)
			var ce *shard.CorruptionError
			switch {
			case err == nil:
			case errors.As(err, &ce) && ce.Field == "checksum" && strings.Contains(ce.Detail, "batch"):
				bad = append(bad, p)
			default:
				t.Fatalf("page %d: %v", p, err)
			}
		}
		if len(bad) != 1 || bad[0] == 0 {
			t.Fatalf("pages refused after one byte in the middle of the file changed: %v (want one, not the first)", bad)
		}
		if st := r.Stats(); st.Scans != 1 {
			t.Fatalf("the shard was scanned %d times", st.Scans)
		}
	})
	t.Run("truncated after the first read", func(t *testing.T) {
		dir, r := openCopy(t)
		if err := os.Truncate(filepath.Join(dir, file), mid); err != nil {
			t.Fatal(err)
		}
		last, _ := r.PageGraphs(r.NumPages() - 1)
		if _, _, err := r.Pin(context.Background(), last); !errors.Is(err, shard.ErrCorrupt) {
			t.Fatalf("pin past the end of a truncated shard: %v", err)
		}
	})
}

// A zstd buffer whose uncompressed-length prefix says 2^40, in a shard
// whose CRC-32C and manifest were resealed with it, is a named corruption
// for both readers, never an allocation of a terabyte (b497eeb's daemon
// died with Go's fatal out-of-memory on the first page read; issue #45).
func TestForgedBufferLengthRefused(t *testing.T) {
	src := fixture.SynthShards(t, "COLLAB", 30, 2)
	man, err := shard.ReadManifest(src)
	if err != nil {
		t.Fatal(err)
	}
	if man.Compression != shard.CompressZstd {
		t.Fatalf("the fixture is %q, want zstd", man.Compression)
	}
	orig, err := os.ReadFile(filepath.Join(src, man.Shards[0].File))
	if err != nil {
		t.Fatal(err)
	}
	// A compressed buffer: its int64 uncompressed length, then a zstd frame.
	magic := []byte{0x28, 0xb5, 0x2f, 0xfd}
	at := -1
	for i := 8; i+4 <= len(orig); i++ {
		if bytes.Equal(orig[i:i+4], magic) {
			if n := binary.LittleEndian.Uint64(orig[i-8:]); n > 0 && n < 1<<30 {
				at = i - 8
				break
			}
		}
	}
	if at < 0 {
		t.Fatal("no compressed buffer found")
	}
	data := append([]byte(nil), orig...)
	binary.LittleEndian.PutUint64(data[at:], 1<<40)
	dir := t.TempDir()
	m := *man
	m.Shards = append([]shard.ShardInfo(nil), man.Shards...)
	m.Shards[0].CRC32C = fmt.Sprintf("%08x", crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)))
	// The page map's CRC of the forged page too: the forger reseals all.
	pm := *m.Shards[0].PageMap
	pm.Pages = append([]shard.PageExtent(nil), pm.Pages...)
	for i, p := range pm.Pages {
		if int64(at) >= p.Offset && int64(at) < p.Offset+p.Length {
			pm.Pages[i].CRC32C = fmt.Sprintf("%08x", crc32.Checksum(data[p.Offset:p.Offset+p.Length], crc32.MakeTable(crc32.Castagnoli)))
		}
	}
	m.Shards[0].PageMap = &pm
	enc, _ := m.Encode()
	os.WriteFile(filepath.Join(dir, shard.ManifestName), enc, 0o644)
	for i, s := range m.Shards {
		b := data
		if i > 0 {
			if b, err = os.ReadFile(filepath.Join(src, s.File)); err != nil {
				t.Fatal(err)
			}
		}
		os.WriteFile(filepath.Join(dir, s.File), b, 0o644)
	}
	if _, err := shard.Open(context.Background(), dir); !errors.Is(err, shard.ErrCorrupt) || !strings.Contains(err.Error(), "forged length") {
		t.Fatalf("eager: %v, want a corruption naming a forged length", err)
	}
	r, err := shard.Open(context.Background(), dir, shard.WithCacheLimit(64<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var readErr error
	for id := range int64(r.NumGraphs()) {
		_, rel, err := r.Pin(context.Background(), id)
		if err != nil {
			readErr = err
			break
		}
		rel()
	}
	if !errors.Is(readErr, shard.ErrCorrupt) || !strings.Contains(readErr.Error(), "forged length") {
		t.Fatalf("paged: %v, want a corruption naming a forged length", readErr)
	}
}

// Close waits for the prefetches it started: once it returns, no page is
// resident and every decoded byte is given back (b497eeb returned while a
// prefetch goroutine was still loading, whose page then stayed; #45).
func TestCloseWaitsForPrefetches(t *testing.T) {
	src := fixture.SynthShardsSized(t, "COLLAB", 200, 4, 1<<20)
	for round := range 8 {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		r, err := shard.Open(context.Background(), src, shard.WithCacheLimit(1<<30), shard.WithAllocator(mem))
		if err != nil {
			t.Fatal(err)
		}
		for p := range r.NumPages() {
			r.Prefetch(p)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		// Now and a while later: a goroutine Close did not wait for
		// allocates after it returned.
		for _, wait := range []time.Duration{0, 150 * time.Millisecond} {
			time.Sleep(wait)
			if n := mem.CurrentAlloc(); n != 0 {
				t.Fatalf("round %d: %d bytes allocated %v after Close", round, n, wait)
			}
		}
	}
}
