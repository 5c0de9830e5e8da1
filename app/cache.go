package app

// What a --cache-limit means for the shuffle and the NodeSam indexes,
// planned from the pages' decoded sizes, estimated without reading a shard.

import (
	"errors"
	"fmt"

	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/internal/bytesize"
	"github.com/augloader/augloader/shard"
)

// indexBytesPerEdge is what a NodeSam index holds per undirected edge
// (aug.Index: CSR both ways and triangle lists), for the cache estimate.
const indexBytesPerEdge = 24

// ErrCacheLimit: a --cache-limit too small for the set's largest page.
var ErrCacheLimit = errors.New("app: cache limit too small")

// cachePlan returns the shuffle given, or the default, and whether NodeSam
// indexes are kept. Without a cache limit: global, indexes as asked, a
// window by size resolved against the pages' decoded sizes. Under one,
// every page's decoded size is estimated from the manifest and the
// graph-size index (shard.Reader.PageBytes, no shard read): a limit that
// cannot hold the largest page is refused, naming what it needs; the
// default shuffle is global while the set fits the limit, else windows of
// as many pages as fill about a quarter of it; indexes are kept only
// while the set and its indexes all fit, since a page read again would
// rebuild its graphs' indexes, which costs more than the draws they save.
func (o LoaderOptions) cachePlan(r *shard.Reader, notes *[]string) (sh epoch.Shuffle, noIndex bool, err error) {
	sh, err = epoch.ParseShuffle(o.Shuffle)
	if err != nil || (sh.Bytes == 0 && o.CacheLimit == 0) {
		return sh, o.NoIndex, err
	}
	decoded, largest, widest := PageTotals(r.PageBytes())
	if sh.Bytes > 0 {
		sh.Window = windowPages(sh.Bytes, largest)
		*notes = append(*notes, fmt.Sprintf("--shuffle window:%s: windows of %d pages (the largest page takes about %s decoded)",
			bytesize.Format(sh.Bytes), sh.Window, mib(largest)))
	}
	if o.CacheLimit == 0 {
		return sh, o.NoIndex, nil
	}
	if largest > o.CacheLimit {
		first, n := r.PageGraphs(widest)
		man := r.Manifest()
		return sh, false, fmt.Errorf("%w: --cache-limit %s cannot hold page %d (%d graphs of %s, the first graph %d), about %s decoded: give --cache-limit %s or more, or convert with a smaller --shard-size",
			ErrCacheLimit, mib(o.CacheLimit), widest, n, man.Shards[r.ShardOf(man.IDAt(first))].File, man.IDAt(first), mib(largest), mib(2*largest))
	}
	man := r.Manifest()
	var indexes int64
	for _, s := range man.Shards {
		indexes += indexBytesPerEdge * s.Edges
	}
	noIndex = o.NoIndex
	if !noIndex && decoded+indexes > o.CacheLimit {
		noIndex = true
		*notes = append(*notes, fmt.Sprintf("NodeSam indexes are not kept: the set with them (about %s) does not fit --cache-limit %s, "+
			"and a page read again would rebuild them at more cost than the draws they save (the bytes are the same)",
			mib(decoded+indexes), mib(o.CacheLimit)))
	}
	if sh.Window > 0 && int64(sh.Window)*largest > o.CacheLimit {
		*notes = append(*notes, fmt.Sprintf("--shuffle %s: a window of up to %d pages of about %s each may not fit --cache-limit %s: "+
			"its pages are then read more than once an epoch (augloader_shard_cache_loads_total); the bytes are the same",
			sh, sh.Window, mib(largest), mib(o.CacheLimit)))
	}
	if o.Shuffle != "" {
		return sh, noIndex, nil
	}
	if sh = defaultShuffle(decoded, largest, o.CacheLimit); !sh.Windowed() {
		return sh, noIndex, nil
	}
	*notes = append(*notes, fmt.Sprintf("--shuffle %s: the set (about %s decoded) does not fit --cache-limit %s, so the "+
		"epoch is drawn in windows of %d pages (record batches of about %s at most; give --shuffle global to keep one permutation of the whole set: slower, same memory)",
		sh, mib(decoded), mib(o.CacheLimit), sh.Window, mib(largest)))
	return sh, noIndex, nil
}

// PageTotals is what a set's pages take decoded together (their estimates,
// shard.Reader.PageBytes), the largest page's size, and which page it is.
func PageTotals(pageBytes []int64) (decoded, largest int64, widest int) {
	for p, b := range pageBytes {
		decoded += b
		if b > largest {
			largest, widest = b, p
		}
	}
	return decoded, largest, widest
}

// windowPages is how many pages a window of size bytes holds: as many as
// the largest page fills, at least one.
func windowPages(size, largest int64) int { return int(max(1, size/max(largest, 1))) }

// ResolveShuffle turns a window given by size (window:SIZE) into its page
// count, as the daemon does, from the pages' estimated decoded sizes.
func ResolveShuffle(sh epoch.Shuffle, pageBytes []int64) epoch.Shuffle {
	if sh.Bytes > 0 {
		_, largest, _ := PageTotals(pageBytes)
		sh.Window = windowPages(sh.Bytes, largest)
	}
	return sh
}

// DefaultShuffle is the shuffle a daemon draws when --shuffle is not given,
// from its pages' estimated decoded sizes (shard.Reader.PageBytes) and its
// cache limit: global without a limit or while the set fits it, else
// windows of as many pages as fill about a quarter of it (at least one).
func DefaultShuffle(pageBytes []int64, limit int64) epoch.Shuffle {
	decoded, largest, _ := PageTotals(pageBytes)
	return defaultShuffle(decoded, largest, limit)
}

func defaultShuffle(decoded, largest, limit int64) epoch.Shuffle {
	if limit == 0 || decoded <= limit {
		return epoch.Shuffle{}
	}
	return epoch.Shuffle{Window: windowPages(limit/4, largest)}
}

// mib spells n bytes in MiB.
func mib(n int64) string { return fmt.Sprintf("%dMiB", (n+(1<<19))>>20) }
