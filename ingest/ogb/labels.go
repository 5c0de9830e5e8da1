package ogb

// Labels, per-graph counts and the split of an OGB dataset.

import (
	"io"
	"math"
	"slices"
	"strings"

	"github.com/augloader/augloader/ingest"
	"github.com/augloader/augloader/ingest/internal/text"
	"github.com/augloader/augloader/shard"
)

func (d *Dataset) readCounts(file string) ([]int32, error) {
	src, err := d.source(file)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	var out []int32
	var r row
	for {
		err := src.read(&r, 1, false)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		shown, line := src.where()
		if v := r.vals[0]; !r.ints || v < 0 || v > math.MaxInt32/2 || v != math.Trunc(v) {
			return nil, formatErr(shown, line, 1, "count %v is not an integer in 0..%d", v, math.MaxInt32/2)
		}
		// A count is checked against its limit here, before anything is
		// held for it: a graph's rows are read only after the counts.
		check := d.limits.CheckNodes
		if file == fileEdgeCount {
			check = d.limits.CheckEdges
		}
		if err := check(name, shown, line, 1, int64(len(out)), int64(r.vals[0])); err != nil {
			return nil, err
		}
		out = append(out, int32(r.vals[0]))
	}
}

// openLabels reads the label file's first row for T and guesses the task;
// with one label a graph it reads them all (8 bytes a graph) to decide
// between classes and binary or regression targets.
func (d *Dataset) openLabels() error {
	if !d.has(fileLabels) {
		missing := d.shown(fileLabels)
		if d.npz {
			missing = d.shown(fileLabelsNpz)
		}
		return formatErr(missing, 0, 0, "missing required file (graph property prediction needs labels)")
	}
	src, err := d.source(fileLabels)
	if err != nil {
		return err
	}
	defer src.Close()
	var r row
	allInts, binary := true, true
	// The first row against each guess, for an asked task's error.
	type at struct {
		shown string
		line  int64
	}
	var notInt, notBinary *at
	for g := 0; ; g++ {
		want := d.targets
		if g == 0 {
			want = -1
		}
		err := src.read(&r, want, true)
		shown, line := src.where()
		if err == io.EOF {
			if g != len(d.nodes) && (d.targets == 1 || g == 0) {
				return formatErr(shown, line, 0, "ends after %d rows; the count lists say %d graphs", g, len(d.nodes))
			}
			break
		}
		if err != nil {
			return err
		}
		if g == len(d.nodes) {
			return formatErr(shown, line, 0, "more rows than the %d graphs counted in the count lists", len(d.nodes))
		}
		if g == 0 {
			if err := d.limits.CheckColumns(name, shown, line, int64(len(r.vals))); err != nil {
				return err
			}
			d.targets, d.hasLabels = len(r.vals), true
		}
		wasInts, wasBinary := allInts, binary
		allInts = allInts && r.ints
		for _, v := range r.vals {
			binary = binary && (v == 0 || v == 1 || math.IsNaN(v))
		}
		if wasInts && !allInts {
			notInt = &at{shown, line}
		}
		if wasBinary && !binary {
			notBinary = &at{shown, line}
		}
		if d.targets > 1 {
			break // streamed by Graphs; the guess is checked there
		}
		d.labels = append(d.labels, r.vals[0])
	}
	task, err := ingest.ChooseTask(d.asked, d.targets, allInts, binary)
	if err != nil {
		where := notInt
		if d.asked == shard.TaskBinary {
			where = notBinary
		}
		if where == nil {
			where = &at{d.shown(fileLabels), 1}
		}
		return formatErr(where.shown, where.line, 0, "%v", err)
	}
	d.task = task
	if d.task == shard.TaskClass {
		d.classes = slices.Clone(d.labels)
		slices.Sort(d.classes)
		d.classes = slices.Compact(d.classes)
	} else {
		d.labels = nil
	}
	return nil
}

// readSplits reads every split/NAME/{train,valid,test}.csv.gz.
func (d *Dataset) readSplits() error {
	for _, e := range d.files.Entries() {
		rest, ok := strings.CutPrefix(e, d.prefix+"split/")
		if !ok || strings.Count(rest, "/") != 1 {
			continue
		}
		if dir, ok := strings.CutSuffix(rest, "/"+fileSplitDict); ok {
			if err := d.readSplitDict(dir); err != nil {
				return err
			}
			continue
		}
		if !strings.HasSuffix(rest, "/train.csv.gz") || d.files.Has(d.prefix+"split/"+strings.TrimSuffix(rest, "train.csv.gz")+fileSplitDict) {
			continue // the folder's split_dict.pt is read, as OGB does
		}
		dir := strings.TrimSuffix(rest, "/train.csv.gz")
		s := ingest.Split{Name: dir}
		for _, set := range []struct {
			file string
			ids  *[]int64
		}{{"train", &s.Train}, {"valid", &s.Valid}, {"test", &s.Test}} {
			file := "split/" + dir + "/" + set.file + ".csv.gz"
			if !d.files.Has(d.prefix + file) {
				return formatErr(d.shown(file), 0, 0, "missing: a split needs train, valid and test")
			}
			rc, err := d.open(file)
			if err != nil {
				return err
			}
			ids, err := text.ReadInts(rc, name, d.shown(file), 1024)
			rc.Close()
			if err != nil {
				return err
			}
			for i, id := range ids {
				if id < 0 || id >= int64(len(d.nodes)) {
					return formatErr(d.shown(file), int64(i+1), 1, "graph %d out of range 0..%d", id, len(d.nodes)-1)
				}
			}
			*set.ids = ids
		}
		d.splits = append(d.splits, s)
	}
	return nil
}

// readSplitDict reads split/DIR/split_dict.pt.
func (d *Dataset) readSplitDict(dir string) error {
	file := "split/" + dir + "/" + fileSplitDict
	ra, size, err := d.files.OpenRandom(d.prefix+file, d.shown(file))
	if err != nil {
		return err
	}
	defer ra.Close()
	s := ingest.Split{Name: dir}
	if s.Train, s.Valid, s.Test, err = readSplitDict(ra, size, d.shown(file), int64(len(d.nodes)), d.limits.MaxPickle); err != nil {
		return err
	}
	for _, set := range [][]int64{s.Train, s.Valid, s.Test} {
		for i, id := range set {
			if id < 0 || id >= int64(len(d.nodes)) {
				return formatErr(d.shown(file), 0, 0, "id %d (item %d) out of range 0..%d", id, i, len(d.nodes)-1)
			}
		}
	}
	d.splits = append(d.splits, s)
	return nil
}
