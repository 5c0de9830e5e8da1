// Package pagecache holds a shard folder's decoded pages under a byte
// limit, for the shard reader. A newcomer needs four ideas.
//
// Pages and pins. A Source reads and decodes page p (a record batch of a
// shard file; its graphs have storage positions Graphs(p)). Pin(ctx, p,
// row) returns the page with the row's graph in it, loading it if absent:
// one load per page at a time, the others waiting for it. Each load and
// each wait runs under its caller's ctx; a load whose caller went away
// fails no waiter, which then loads the page itself. A pinned page is
// never dropped, shrunk or freed; its release makes it a candidate again.
// Used bytes are the decoded bytes the Source's allocator counted, plus
// what users charged (below), plus the futures' own bytes; whenever they
// pass the limit, unpinned pages go.
//
// Futures. A stream knows in advance which graphs each of its batches
// reads (a pure function of the seed, the epoch and the plan). It hands
// that over once (NewFuture, then Cache.Foresee, which returns a Stream)
// and from then on only pins and releases: Stream.Pin(ctx, b, p, row)
// pins for batch b, and the first pin of b reads ahead the pages of batch
// b+ahead; the release of b's last planned pin says b is built (its
// graphs whose last use was b are garbage from then on);
// Stream.ReleaseBatch(b), b sent, moves the stream past b and cools the
// pages whose last batch was b.
//
// Policy. With futures registered, room is made in this order: a page no
// stream needs again; a charge (derived data, cheap to rebuild); the
// garbage of a page (compaction: the page is copied down to the graphs
// still needed); then Belady's rule, the page needed farthest ahead, which is
// first trimmed of its farthest graphs when that frees enough. A read
// ahead displaces only pages needed later than the one it reads. Without
// futures the policy is recency: cold pages (no batch ahead needs them),
// then charges, then warm pages, least recently released first.
//
// Charges. A user may attach to a pinned page something derived from its
// graphs (the loader's NodeSam indexes) with the pin's release. Its bytes
// count in the limit; under pressure it is forgotten (Charge.Forget)
// before any page a stream still needs, and always when its page goes.
//
// The cache's state is one struct under one mutex (cache.go); pin.go is
// the one path that loads a page; policy.go chooses what goes; compact.go
// shrinks pages; future.go and stream.go are a stream's side.
package pagecache
