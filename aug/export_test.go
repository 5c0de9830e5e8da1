package aug

// WarmPPR ranks every root of g for SubMix with ratio p and stores the
// rankings in the cache g's Index was enabled with: the state a long run
// reaches, for benchmarks to measure without waiting for it.
func WarmPPR(g *Graph, p float64, selfLoops bool, s *Scratch) {
	ix := g.Index
	if !ix.valid(g) || ix.ppr == nil {
		return
	}
	for root := int32(0); root < g.N; root++ {
		sd := s.submixSide(g, root, selfLoops, &s.off, &s.adj, &s.comp)
		s.bfsSide(&sd)
		l := rankLimit(p, len(*sd.comp))
		if l < 2 {
			continue
		}
		s.rank(root, *sd.comp, sd.off, sd.adj, g.N, l, selfLoops)
		ix.ppr.store(sd.slots, root, s.order, l)
	}
}

// ScratchRefs reports whether s refers to a request's context or to a
// partner's views (Scratch.Forget drops them).
func ScratchRefs(s *Scratch) bool {
	return s.ctx != nil || s.partner.Edges != nil || s.partner.Index != nil
}

// DropOnly and DropRun are NodeSam's emit fast path for a clean node's
// run (dropOnly, dropRun).
var (
	DropOnly = dropOnly
	DropRun  = dropRun
)
