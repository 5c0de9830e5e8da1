package aug_test

import (
	"testing"

	"github.com/augloader/augloader/aug"
)

// Every stream id keeps its number: changing one changes every augmented
// epoch that draws from it (a trial edit that added an op constant in the
// middle of an iota block moved StreamPolicyChoice, and the server's
// golden stream failed at byte 3640 while aug's own goldens passed). Ids
// are unique, and every op of the table has its own.
func TestStreamIDsPinned(t *testing.T) {
	pinned := map[string]struct{ got, want uint64 }{
		"OpNone":             {aug.OpNone, 1},
		"OpNodeSam":          {aug.OpNodeSam, 2},
		"OpNodeSamBase":      {aug.OpNodeSamBase, 3},
		"OpSplitOnly":        {aug.OpSplitOnly, 4},
		"OpMergeOnly":        {aug.OpMergeOnly, 5},
		"OpSubMix":           {aug.OpSubMix, 6},
		"OpSubMixBase":       {aug.OpSubMixBase, 7},
		"OpDropEdge":         {aug.OpDropEdge, 8},
		"OpDropNode":         {aug.OpDropNode, 9},
		"OpAddEdge":          {aug.OpAddEdge, 10},
		"OpChangeAttr":       {aug.OpChangeAttr, 11},
		"StreamPolicyChoice": {aug.StreamPolicyChoice, 12},
		"StreamPartner":      {aug.StreamPartner, 13},
		"OpSubgraph":         {aug.OpSubgraph, 14},
		"OpAttrMask":         {aug.OpAttrMask, 15},
		"StreamTwinChoice":   {aug.StreamTwinChoice, 16},
		"OpRotate":           {aug.OpRotate, 17},
		"OpNoise":            {aug.OpNoise, 18},
		"TwinStride":         {aug.TwinStride, 1 << 16},
		"StreamPermutation":  {aug.StreamPermutation, 1000},
		"StreamFolds":        {aug.StreamFolds, 1001},
		"StreamBlocks":       {aug.StreamBlocks, 1002},
		"StreamWindow":       {aug.StreamWindow, 1003},
	}
	seen := map[uint64]string{}
	for name, id := range pinned {
		if id.got != id.want {
			t.Errorf("%s is %d, pinned at %d: every epoch drawing from it would change", name, id.got, id.want)
		}
		if other, dup := seen[id.got]; dup {
			t.Errorf("%s and %s share stream id %d", name, other, id.got)
		}
		seen[id.got] = name
	}
	for _, s := range aug.Specs() {
		if _, ok := seen[s.ID]; !ok {
			t.Errorf("op %s has stream id %d, which is not pinned here: add it", s.Name, s.ID)
		}
	}
}
