// Package loader turns shards into a stream of augmented, PyG-ready Arrow
// record batches: a worker pool reads graphs through shard.Reader, applies
// the epoch's policy (package epoch) with package aug, and collates each
// training batch into one record batch (docs/protocol.md, "Batch schema").
//
// A request goes through two steps. Plan (plan.go) checks it and cuts
// the rank's batches: the pass's permutation (global, or windows of pages
// under Config.Shuffle, SubMix then drawing partners in the target's
// window), the rank's slice (resume phases re-slice an epoch begun at
// other world sizes), a fixed number of batches per epoch over endless
// passes, node and edge budgets, and each batch's memory bound. Stream
// (stream.go) builds the planned batches with the worker pool (worker.go)
// and sends them in order.
//
// Contract: the record batches of a request are a pure function of the
// configuration and the request (epoch, rank, world size, batch size,
// start batch, resume phases, twins and their weights): byte-identical
// whatever the number of workers or the scheduling. Each graph's ops are
// drawn once per batch, a twin's from its own stream, so a twin batch
// holds k copies of the same graphs, twin-major. Output is strictly in
// batch order; at most Window batches are in flight per stream, and a
// Memory shared by streams bounds their bytes (a stream with nothing in
// flight may always build its next batch), so a slow consumer never grows
// memory; a cancelled context stops the pool. Node and edge budgets hold
// for the augmented batches sent (each graph is counted at aug.Bound of
// its op; a twin batch at its copies' sum). A request whose graph could
// never fit the memory budget is refused at Plan, naming the graph. A
// Loader is safe for concurrent use by many requests.
package loader
