package shard

// Adding a page map to a folder written before the converter wrote one.

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/augloader/augloader/internal/crc32c"
	"github.com/augloader/augloader/internal/iox"
)

// AddPageMap gives every shard of the folder dir that has none a page
// map (ShardInfo.PageMap), each shard read through once and checked
// against its CRC-32C first. The folder is replaced as a whole, only once
// the new one is complete (shard files hard-linked, not copied, where the
// file system allows; the manifest resealed, the graph-size index's
// trailer made to name it). It returns the new manifest and how many
// shards it mapped (0: the folder was already mapped, and is untouched).
func AddPageMap(ctx context.Context, dir string) (*Manifest, int, error) {
	st := DirStore(dir)
	man, digest, err := readManifest(ctx, st)
	if err != nil {
		return nil, 0, err
	}
	mapped := 0
	for i := range man.Shards {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		if man.Shards[i].PageMap != nil {
			continue
		}
		ix, err := scanShard(ctx, st, man, i)
		if err != nil {
			return nil, 0, err
		}
		ix.close()
		man.Shards[i].PageMap = ix.pageMap()
		mapped++
	}
	if mapped == 0 {
		return man, 0, nil
	}
	data, err := man.Encode()
	if err != nil {
		return nil, 0, err
	}
	if _, err := ParseManifest(data); err != nil {
		return nil, 0, err
	}
	sizes, err := readGraphSizes(ctx, st, man, digest)
	if err != nil && !errors.Is(err, ErrNoSizes) {
		return nil, 0, err
	}
	td, err := iox.NewTempDir(dir)
	if err != nil {
		return nil, 0, fmt.Errorf("shard: %w", err)
	}
	defer td.Abort()
	if err := linkFolder(dir, td.Path, man.GraphSizesFile()); err != nil {
		return nil, 0, err
	}
	if sizes != nil {
		if err := retrailSizes(dir, td.Path, man.GraphSizesFile(), sha256.Sum256(data)); err != nil {
			return nil, 0, err
		}
	}
	if err := iox.WriteFileAtomic(filepath.Join(td.Path, ManifestName), data, 0o644); err != nil {
		return nil, 0, fmt.Errorf("shard: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	if err := td.Commit(); err != nil {
		return nil, 0, fmt.Errorf("shard: %w", err)
	}
	return man, mapped, nil
}

// pageMap is the page map a scan found.
func (ix *shardIndex) pageMap() *PageMap {
	pm := &PageMap{Schema: Extent{Offset: 8, Length: int64(len(ix.schemaMsg)), CRC32C: crcHex(ix.schemaMsg)},
		Pages: make([]PageExtent, len(ix.pages))}
	for i, p := range ix.pages {
		pm.Pages[i] = PageExtent{Offset: p.off, Metadata: p.meta, Length: p.size, CRC32C: fmt.Sprintf("%08x", p.crc)}
	}
	return pm
}

// linkFolder hard-links (or, where the file system refuses, copies) the
// regular files of src but the manifest and the graph-size index (sizes)
// into dst.
func linkFolder(src, dst, sizes string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return fmt.Errorf("shard: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || name == ManifestName || name == sizes || strings.HasPrefix(name, ".") {
			continue
		}
		from, to := filepath.Join(src, name), filepath.Join(dst, name)
		if os.Link(from, to) == nil {
			continue
		}
		if err := copyFile(from, to); err != nil {
			return fmt.Errorf("shard: %s: %w", name, err)
		}
	}
	return nil
}

func copyFile(from, to string) error {
	in, err := iox.OpenRegular(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	return iox.SyncClose(out, func() error { _, err := io.Copy(out, in); return err })
}

// retrailSizes writes src's graph-size index (checked by the caller) into
// dst (both named name) with a trailer naming the manifest whose SHA-256
// is manifest.
func retrailSizes(src, dst, name string, manifest [32]byte) error {
	data, err := os.ReadFile(filepath.Join(src, name))
	if err != nil || len(data) < sizesTrailer {
		return fmt.Errorf("shard: %s: %v", name, err)
	}
	copy(data[len(data)-sizesTrailer+24:], manifest[:])
	if err := iox.WriteFileAtomic(filepath.Join(dst, name), data, 0o644); err != nil {
		return fmt.Errorf("shard: %w", err)
	}
	return nil
}

// crcHex is b's CRC-32C as the manifest writes it.
func crcHex(b []byte) string { return fmt.Sprintf("%08x", crc32c.Checksum(b)) }
