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

// closeStore releases what openStore holds: a disk cache's folder.
func closeStore(st shard.Store) error {
	if c, ok := st.(*objstore.DiskCache); ok {
		return c.Close()
	}
	return nil
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
