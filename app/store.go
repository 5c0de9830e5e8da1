package app

import (
	"context"
	"time"

	"github.com/augloader/augloader/objstore"
	"github.com/augloader/augloader/shard"
)

// DefaultDiskCacheLimit is --disk-cache-limit's default.
const DefaultDiskCacheLimit = 10 << 30

// openStore resolves o.Shards and puts a disk cache before it when
// o.DiskCache names one.
func openStore(ctx context.Context, o LoaderOptions) (shard.Store, error) {
	st, err := objstore.Resolve(ctx, o.Shards)
	if err != nil || o.DiskCache == "" {
		return st, err
	}
	return objstore.NewDiskCache(st, o.DiskCache, o.DiskCacheLimit)
}

// closeStore releases what openStore holds: a disk cache's folder, and
// the object store's requests (ended, running or not).
func closeStore(st shard.Store) error {
	stopReads(st)
	if c, ok := st.(*objstore.DiskCache); ok {
		return c.Close()
	}
	return nil
}

// StopReads ends the requests of the object store the views read, those
// running and any later (objstore.ErrClosed): what shutdown does once the
// streams have had their drain, so that no read of a stalled store holds
// the daemon's exit. A local folder's reads are left as they are.
func (b *Built) StopReads() { stopReads(b.Store) }

func stopReads(st shard.Store) {
	if s3 := ObjectStore(st); s3 != nil {
		s3.Close()
	}
}

// ObjectStore is the object store under st (a disk cache's too), or nil
// for a local folder.
func ObjectStore(st shard.Store) *objstore.S3 {
	if c, ok := st.(*objstore.DiskCache); ok {
		st = c.Inner()
	}
	s3, _ := st.(*objstore.S3)
	return s3
}

// WatchFolder asks, every interval until ctx ends, whether the folder in
// object storage the views read was replaced since it was opened (its
// manifest's version changed: shardconv convert --force), and tells
// replaced once when it was. A daemon serves the version it opened: the
// pages it holds, or its disk cache holds, are that version's, and a page
// it must read again from an object the replacement deleted fails naming
// it; serving the new folder takes a restart. A local folder is not
// watched (a replacement there is a rename the reader's open files do not
// see).
func (b *Built) WatchFolder(ctx context.Context, interval time.Duration, replaced func(opened, now string)) {
	s3 := ObjectStore(b.Store)
	if s3 == nil {
		return
	}
	version := func() string {
		f, err := s3.Open(ctx, shard.ManifestName)
		if err != nil {
			return "" // gone, or not answered: asked again next time
		}
		v, _ := f.(shard.Versioned)
		if v == nil {
			return ""
		}
		return v.Version()
	}
	opened := version()
	if opened == "" {
		return
	}
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if now := version(); now != "" && now != opened {
				replaced(opened, now)
				return
			}
		}
	}()
}
