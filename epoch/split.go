package epoch

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/augloader/augloader/aug"
	"github.com/augloader/augloader/internal/iox"
)

// Split is a split file: {"training": [...], "test": [...]}, graph ids,
// and optionally "valid" (a validation set, as OGB's splits have).
type Split struct {
	Training []int64 `json:"training"`
	Valid    []int64 `json:"valid,omitempty"`
	Test     []int64 `json:"test"`
}

// Set returns the ids of set training, valid or test.
func (s *Split) Set(name string) ([]int64, bool) {
	switch name {
	case "training":
		return s.Training, true
	case "valid":
		return s.Valid, true
	case "test":
		return s.Test, true
	}
	return nil, false
}

// ErrSplit is the category of every problem with a split file or a folds
// folder.
var ErrSplit = errors.New("epoch: bad split")

// ReadSplit reads and checks a split file against a dataset of n graphs:
// both keys present (a missing "test" was once read as "every graph"),
// ids in range, none twice within a set, and no id in both sets (a test
// set that overlaps the training set is refused, naming the ids).
func ReadSplit(path string, n int64) (*Split, error) {
	f, err := iox.OpenRegular(path)
	if err != nil {
		return nil, fmt.Errorf("epoch: split: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("epoch: split %s: %w", path, err)
	}
	var s Split
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrSplit, path, err)
	}
	var keys struct{ Training, Test *json.RawMessage }
	if err := json.Unmarshal(b, &keys); err != nil || keys.Training == nil || keys.Test == nil {
		return nil, fmt.Errorf(`%w: %s: a split file needs both "training" and "test" lists (write [] for an empty one)`, ErrSplit, path)
	}
	if err := s.Check(n); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrSplit, path, err)
	}
	return &s, nil
}

// Check checks a split against a dataset of n graphs: ids in range, none
// twice within a set, and no id in two sets (naming the ids).
func (s *Split) Check(n int64) error {
	names := [...]string{"training", "valid", "test"}
	seen := make(map[int64]uint8, len(s.Training)+len(s.Valid)+len(s.Test))
	for set, ids := range [][]int64{s.Training, s.Valid, s.Test} {
		for _, id := range ids {
			if id < 0 || id >= n {
				return fmt.Errorf("%s id %d out of range 0..%d", names[set], id, n-1)
			}
			if seen[id]&(1<<set) != 0 {
				return fmt.Errorf("%s lists id %d twice", names[set], id)
			}
			seen[id] |= 1 << set
		}
	}
	for a := 0; a < 3; a++ {
		for b := a + 1; b < 3; b++ {
			var both []int64
			for id, m := range seen {
				if m&(1<<a) != 0 && m&(1<<b) != 0 {
					both = append(both, id)
				}
			}
			if len(both) > 0 {
				slices.Sort(both)
				shown := both[:min(len(both), 10)]
				more := ""
				if len(both) > len(shown) {
					more = fmt.Sprintf(" and %d more", len(both)-len(shown))
				}
				return fmt.Errorf("%d ids are in both the %s and the %s set: %v%s", len(both), names[a], names[b], shown, more)
			}
		}
	}
	return nil
}

// FoldFileName names fold i of k in a folds folder: fold-NN.json, the
// number zero-padded to the width of k-1 (at least two digits), so the
// names sort in fold order.
func FoldFileName(i, k int) string {
	w := max(2, len(strconv.Itoa(k-1)))
	return fmt.Sprintf("fold-%0*d.json", w, i)
}

// FoldFiles lists a folds folder's split files by fold number: files[i]
// is the file of fold i, the number taken from its name (fold-7.json,
// fold-07.json and fold-007.json are all fold 7), never from where the
// name sorts. Folds must be numbered 0..k-1: a gap (fold-03.json
// missing) or two files of one fold is refused, naming them.
func FoldFiles(dir string) ([]string, error) {
	m, err := filepath.Glob(filepath.Join(dir, "fold-*.json"))
	if err != nil {
		return nil, err
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("%w: --folds %s: no fold-*.json split files (write them with augloader split)", ErrSplit, dir)
	}
	byFold := make([]string, len(m))
	for _, p := range m {
		num := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "fold-"), ".json")
		i, err := strconv.Atoi(num)
		if err != nil || i < 0 || strings.TrimLeft(num, "0123456789") != "" {
			return nil, fmt.Errorf("%w: --folds %s: %s is not fold-NUMBER.json", ErrSplit, dir, filepath.Base(p))
		}
		if i >= len(m) {
			return nil, fmt.Errorf("%w: --folds %s: %s, but there are only %d fold files: folds must be numbered 0..%d without gaps", ErrSplit, dir, filepath.Base(p), len(m), len(m)-1)
		}
		if byFold[i] != "" {
			return nil, fmt.Errorf("%w: --folds %s: %s and %s are both fold %d", ErrSplit, dir, filepath.Base(byFold[i]), filepath.Base(p), i)
		}
		byFold[i] = p
	}
	return byFold, nil
}

// WriteFolds writes folds as dir/FoldFileName(i, k), each crash-safely
// through write (a temporary name, fsync, rename). A folder that already
// holds fold files is refused unless force, which removes them first: a
// stale fold-12.json beside a new 10-fold split would be served as a
// fold of it.
func WriteFolds(dir string, folds []Split, force bool, write func(path string, b []byte) error) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, err := filepath.Glob(filepath.Join(dir, "fold-*.json"))
	if err != nil {
		return err
	}
	if len(old) > 0 {
		if !force {
			return fmt.Errorf("%w: %s already holds %d fold files (%s, …): use --force to replace them", ErrSplit, dir, len(old), filepath.Base(old[0]))
		}
		for _, p := range old {
			if err := os.Remove(p); err != nil {
				return err
			}
		}
	}
	for i, f := range folds {
		if f.Training == nil {
			f.Training = []int64{} // [], not null: both keys are required
		}
		if f.Test == nil {
			f.Test = []int64{}
		}
		b, err := json.Marshal(f)
		if err != nil {
			return err
		}
		if err := write(filepath.Join(dir, FoldFileName(i, len(folds))), append(b, '\n')); err != nil {
			return err
		}
	}
	return nil
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
