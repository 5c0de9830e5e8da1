package epoch

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"

	"github.com/augloader/augloader/aug"
)

// Split is a split file: {"training": [...], "test": [...]}, graph ids.
type Split struct {
	Training []int64 `json:"training"`
	Test     []int64 `json:"test"`
}

// ReadSplit reads and checks a split file against a dataset of n graphs:
// ids in range, none twice within a set.
func ReadSplit(path string, n int64) (*Split, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("epoch: split: %w", err)
	}
	defer f.Close()
	var s Split
	dec := json.NewDecoder(io.LimitReader(f, 64<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("epoch: split %s: %w", path, err)
	}
	for name, ids := range map[string][]int64{"training": s.Training, "test": s.Test} {
		seen := make(map[int64]bool, len(ids))
		for _, id := range ids {
			if id < 0 || id >= n {
				return nil, fmt.Errorf("epoch: split %s: %s id %d out of range 0..%d", path, name, id, n-1)
			}
			if seen[id] {
				return nil, fmt.Errorf("epoch: split %s: %s lists id %d twice", path, name, id)
			}
			seen[id] = true
		}
	}
	return &s, nil
}

// StratifiedKFold splits graph ids 0..len(labels)-1 into k folds keeping
// class proportions: each class's ids are shuffled (keyed by seed) and dealt
// round-robin, continuing across classes. Fold i's test set is what was
// dealt to it; its training set is everything else. Ids are sorted.
func StratifiedKFold(labels []int32, k int, seed uint64) ([]Split, error) {
	if k < 2 || k > len(labels) {
		return nil, fmt.Errorf("epoch: %d folds for %d graphs", k, len(labels))
	}
	byClass := map[int32][]int64{}
	var classes []int32
	for id, c := range labels {
		if _, ok := byClass[c]; !ok {
			classes = append(classes, c)
		}
		byClass[c] = append(byClass[c], int64(id))
	}
	slices.Sort(classes)
	a, b := aug.Stream(seed, 0, -1, aug.StreamFolds)
	r := rand.New(rand.NewPCG(a, b))
	test := make([][]int64, k)
	next := 0
	for _, c := range classes {
		ids := byClass[c]
		r.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		for _, id := range ids {
			test[next] = append(test[next], id)
			next = (next + 1) % k
		}
	}
	out := make([]Split, k)
	for i := range out {
		inTest := make(map[int64]bool, len(test[i]))
		for _, id := range test[i] {
			inTest[id] = true
		}
		slices.Sort(test[i])
		out[i].Test = test[i]
		for id := range int64(len(labels)) {
			if !inTest[id] {
				out[i].Training = append(out[i].Training, id)
			}
		}
	}
	return out, nil
}
