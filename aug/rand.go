package aug

import "math/rand/v2"

// Rand is the randomness an op draws from: *rand.Rand satisfies it, and
// tests script it to check outputs by hand.
type Rand interface {
	IntN(n int) int
	Int64N(n int64) int64
	Float64() float64
	Uint64() uint64
}

// Stream ids: the last element of the (seed, epoch, graph, id) tuple that
// keys every random stream. The ops' ids (the Op* constants) and the
// draws made outside any op (the Stream* constants) share one space, so no
// two draws share a stream. They are part of the determinism contract:
// changing one changes every augmented epoch. Each has its number written
// out (never iota: a constant added in the middle once shifted
// StreamPolicyChoice and changed every mixture epoch), pinned by
// TestStreamIDsPinned; a new op takes the next unused number.
const (
	OpNone        uint64 = 1
	OpNodeSam     uint64 = 2
	OpNodeSamBase uint64 = 3
	OpSplitOnly   uint64 = 4
	OpMergeOnly   uint64 = 5
	OpSubMix      uint64 = 6
	OpSubMixBase  uint64 = 7
	OpDropEdge    uint64 = 8
	OpDropNode    uint64 = 9
	OpAddEdge     uint64 = 10
	OpChangeAttr  uint64 = 11
	// StreamPolicyChoice keys which policy of a mixture a graph gets.
	StreamPolicyChoice uint64 = 12
	// StreamPartner is reserved (SubMix draws its partner from the
	// target's own stream).
	StreamPartner uint64 = 13
	OpSubgraph    uint64 = 14
	OpAttrMask    uint64 = 15
	// StreamTwinChoice keys which declared twin set a graph's twins get
	// (a request's twin_weights over the daemon's sets).
	StreamTwinChoice uint64 = 16
	// OpRotate and OpNoise key a structure's random rotation and its
	// position noise (the structure kind, package atoms; the loader).
	OpRotate uint64 = 17
	OpNoise  uint64 = 18
)

// TwinStride separates the streams of a graph's twins: twin t draws its
// op's randomness from stream OpID+t·TwinStride and its mixture's choice
// from StreamPolicyChoice+t·TwinStride. Twin 0's streams are a plain
// stream's, so twin 0 of a twin set is byte for byte what a daemon serving
// that twin's schedule alone sends; the stride is above every other id.
const TwinStride uint64 = 1 << 16

// Stream ids of the epoch-level draws (package epoch).
const (
	// StreamPermutation keys the per-epoch permutation of the served set.
	StreamPermutation uint64 = 1000
	// StreamFolds keys the k-fold shuffle.
	StreamFolds uint64 = 1001
	// StreamBlocks keys the per-epoch order of the shard blocks of a
	// windowed shuffle.
	StreamBlocks uint64 = 1002
	// StreamWindow keys the permutation inside one window of a windowed
	// shuffle (the id is the window's index).
	StreamWindow uint64 = 1003
)

// mix64 is SplitMix64's finaliser: a bijection on uint64 with full avalanche.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Stream returns the two PCG seeds for the draw (seed, epoch, id, op): a
// pure function, so any goroutine reproduces the same stream.
func Stream(seed, epoch uint64, id int64, op uint64) (uint64, uint64) {
	h := mix64(seed ^ 0x6175676c6f616465) // "augloade"
	h = mix64(h ^ epoch)
	h = mix64(h ^ uint64(id))
	h = mix64(h ^ op)
	return seed, h
}

// Rand reseeds the scratch's generator for (seed, epoch, id, op) and
// returns it; valid until the next call. No allocation.
func (s *Scratch) Rand(seed, epoch uint64, id int64, op uint64) *rand.Rand {
	a, b := Stream(seed, epoch, id, op)
	s.pcg.Seed(a, b)
	if s.rng == nil {
		s.rng = rand.New(&s.pcg)
	}
	return s.rng
}
