package app

import (
	"context"

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
	if s3 := ObjectStore(st); s3 != nil {
		s3.Close()
	}
	if c, ok := st.(*objstore.DiskCache); ok {
		return c.Close()
	}
	return nil
}

// StopReads ends the requests of the object store the views read, those
// running and any later (objstore.ErrClosed): what shutdown does once the
// streams have had their drain, so that no read of a stalled store holds
// the daemon's exit. A local folder's reads are left as they are.
func (b *Built) StopReads() {
	if s3 := ObjectStore(b.Store); s3 != nil {
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
