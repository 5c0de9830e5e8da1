// Package app builds augloader's pieces from command-line settings: the
// views behind `serve` and the loader behind `materialize`, shared so both
// apply the same defaults and checks.
//
// A view is a served subset of the shards with its schedule:
//
//	NAME=all[:POLICY]                 every graph
//	NAME={fold}:training|test[:POLICY]  one set of every split file of --folds (a view per fold)
//	NAME=FILE:training|valid|test[:POLICY]  one set of one split file
//
// POLICY is a schedule (docs/schedule.md). Without one, a test or valid
// set gets none and any other set the daemon's --policy (nodesam unless
// given); a test or valid set with an augmenting schedule is refused
// unless AugmentTest. Twin sets (Twins, `serve --twins 'A / B'`) reach
// every training or whole-set view, and a test or valid one only with
// AugmentTest.
package app

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/internal/iox"
	"github.com/augloader/augloader/loader"
	"github.com/augloader/augloader/shard"
	"github.com/augloader/augloader/wire"
)

// Defaults of LoaderOptions, the one place serve's and materialize's flags
// take theirs from.
const (
	// DefaultPolicy is what a training (or whole-set) view applies when
	// no policy is given; a test view applies none.
	DefaultPolicy       = "nodesam"
	DefaultBatchSize    = 32
	DefaultMemoryBudget = loader.DefaultMemory
	DefaultPPRCache     = 512 << 20
	DefaultRemainder    = epoch.Pad
	// MaxWorkers caps --workers.
	MaxWorkers = 1024
	// MinMemoryBudget is the least --memory-budget taken.
	MinMemoryBudget = 1 << 20
	// MinCacheLimit is the least non-zero --cache-limit taken.
	MinCacheLimit = 16 << 20
)

// Split sets a view may serve.
const (
	SetAll      = "all"
	SetTraining = "training"
	SetTest     = "test"
	SetValid    = "valid" // a split file's validation set (OGB's splits)
)

// LoaderOptions are the common settings of serve and materialize. The
// commands only parse flags into it; EnsureDefaults fills what is unset,
// and Validate reports every problem at once, naming each setting as its
// flag (BuildViews does both).
type LoaderOptions struct {
	Shards string
	Seed   uint64
	// Policy is the schedule text of views that give none (empty:
	// DefaultPolicy); ignored when ScheduleFile is set.
	Policy       string
	ScheduleFile string
	Workers      int // default runtime.NumCPU(), at most MaxWorkers
	BatchSize    int // default DefaultBatchSize, at most loader.MaxBatchSize
	// SplitFile and SplitSet make the single view of a daemon without
	// Views: one set of one split file.
	SplitFile  string
	SplitSet   string          // training (default) or test
	Remainder  epoch.Remainder // pad (default) or drop
	NodeBudget int
	EdgeBudget int
	// Balanced cuts budget batches in steps of one batch per rank
	// (loader.Config.Balanced; serve --balanced, and --max-atoms and
	// --max-edges, a structure set's budgets, which imply it).
	Balanced bool
	// EdgeFill is what an edge no input edge explains carries
	// (aug.ParseEdgeFill's "codes=…;x=…"; empty: each categorical edge
	// column's reserved code, 0 for floats).
	EdgeFill string
	MaxEpoch uint64 // refuse epochs ≥ MaxEpoch (0: no limit)
	NoIndex  bool   // keep graphs unindexed (less memory, slower NodeSam)
	// MemoryBudget bounds the bytes of batches in flight across every
	// stream of every view (loader.Memory); 0: DefaultMemoryBudget.
	MemoryBudget int64
	// PPRCache bounds SubMix's cached PageRank rankings (aug.PPRCache); 0
	// disables the cache.
	PPRCache int64
	// Views are view specs (the package comment); none: one view from
	// SplitFile/SplitSet, or of every graph.
	Views []string
	// Folds is the folder of split files (fold-*.json) {fold} views use.
	Folds string
	// AugmentTest allows an augmenting schedule on a test set.
	AugmentTest bool
	// Structures: a structure set's rotations, noise and served cutoff
	// (loader.StructureConfig; refused for graphs).
	Structures loader.StructureConfig
	// CacheLimit bounds the decoded pages (a shard file's record batches)
	// and NodeSam indexes held (shard.WithCacheLimit); 0 reads every shard
	// at start and keeps it.
	CacheLimit int64
	// DiskCache is a local folder that keeps the ranges read from the
	// shards' store, at most DiskCacheLimit bytes (0: DefaultDiskCacheLimit),
	// across restarts (objstore.DiskCache); empty: none.
	DiskCache      string
	DiskCacheLimit int64
	// Twins declares the twin sets a request with twins draws from
	// (wire.Request.Twins): each "A / B[ / …]", a schedule per twin
	// (epoch.ParseTwinSet), every set as long. Every training or
	// whole-set view serves them; a test or valid view with AugmentTest.
	Twins []string
	// Shuffle is "global", "window:N" (N pages), "window:SIZE" (pages
	// filling SIZE decoded), or empty: global unless the set does not fit
	// CacheLimit, then a window of pages filling about a quarter of it (a
	// note says which).
	Shuffle string
}

// EnsureDefaults fills the settings left at their zero value.
func (o *LoaderOptions) EnsureDefaults() {
	if o.Workers == 0 {
		o.Workers = runtime.NumCPU()
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.Remainder == "" {
		o.Remainder = DefaultRemainder
	}
	if o.SplitSet == "" {
		o.SplitSet = SetTraining
	}
	if o.DiskCache != "" && o.DiskCacheLimit == 0 {
		o.DiskCacheLimit = DefaultDiskCacheLimit
	}
	if o.MemoryBudget == 0 {
		o.MemoryBudget = DefaultMemoryBudget
	}
}

// Validate checks every setting and reports every problem, each naming
// its flag ("--batch-size 0: want 1..65536"), joined in one error.
func (o *LoaderOptions) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if o.Shards == "" {
		bad("--shards is required")
	}
	if o.Workers < 1 || o.Workers > MaxWorkers {
		bad("--workers %d: want 1..%d", o.Workers, MaxWorkers)
	}
	if o.BatchSize < 1 || o.BatchSize > loader.MaxBatchSize {
		bad("--batch-size %d: want 1..%d", o.BatchSize, loader.MaxBatchSize)
	}
	if o.Balanced && o.NodeBudget == 0 && o.EdgeBudget == 0 {
		bad("--balanced: give --node-budget or --edge-budget (--max-atoms or --max-edges for structures)")
	}
	if o.NodeBudget < 0 {
		bad("--node-budget %d: want an integer ≥ 0", o.NodeBudget)
	}
	if o.EdgeBudget < 0 {
		bad("--edge-budget %d: want an integer ≥ 0", o.EdgeBudget)
	}
	if o.Remainder != epoch.Pad && o.Remainder != epoch.Drop {
		bad("--remainder %q: want one of pad, drop", string(o.Remainder))
	}
	if o.SplitSet != SetTraining && o.SplitSet != SetTest && o.SplitSet != SetValid {
		bad("--split-set %q: want one of training, valid, test", o.SplitSet)
	}
	if o.MemoryBudget < MinMemoryBudget {
		bad("--memory-budget %d bytes: want at least 1MiB", o.MemoryBudget)
	}
	if o.PPRCache < 0 {
		bad("--ppr-cache %d bytes: want 0 (no cache) or more", o.PPRCache)
	}
	if o.CacheLimit < 0 {
		bad("--cache-limit %d bytes: want 0 (hold every shard) or more", o.CacheLimit)
	} else if o.CacheLimit > 0 && o.CacheLimit < MinCacheLimit {
		bad("--cache-limit %d bytes: want at least 16MiB (or 0: hold every shard)", o.CacheLimit)
	}
	if o.DiskCache != "" && o.DiskCacheLimit <= 0 {
		bad("--disk-cache-limit %d bytes: want a positive size", o.DiskCacheLimit)
	}
	if _, err := epoch.ParseShuffle(o.Shuffle); err != nil {
		bad("--shuffle %q: want global, window:N (N ≥ 1 pages, a shard file's record batches) or window:SIZE (e.g. 64MiB of pages)", o.Shuffle)
	}
	if o.Policy != "" && o.ScheduleFile != "" {
		bad("--policy and --schedule: give one (both say the schedule of views that name none)")
	}
	if len(o.Views) > 0 && o.SplitFile != "" {
		bad("--split with --view: a view names its own split file (NAME=FILE:training|test)")
	}
	folds := false
	for _, v := range o.Views {
		spec, err := ParseViewSpec(v)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		folds = folds || spec.Split == "{fold}"
	}
	if folds && o.Folds == "" {
		bad("--view NAME={fold}:…: give --folds (the folder of fold-NN.json split files)")
	}
	return errors.Join(errs...)
}

// Built is an open dataset, its views, and what it needs closed.
type Built struct {
	Reader *shard.Reader
	// Store holds the shard folder (a local one, or objstore.S3: its
	// request counters go to /metrics), behind an objstore.DiskCache when
	// DiskCache is set.
	Store shard.Store
	// Shuffle is the order's draw every view uses.
	Shuffle epoch.Shuffle
	// noIndex: no NodeSam indexes (asked, or they do not fit the cache).
	noIndex bool
	Views   *loader.Views
	// Loader is the first view's loader (fold 0): its configuration is
	// every view's but for the schedule and the served set.
	Loader *loader.Loader
	// Notes say, for the log, where a default was applied.
	Notes []string
}

// Close releases the shard reader and the disk cache.
func (b *Built) Close() error { return errors.Join(b.Reader.Close(), closeStore(b.Store)) }

// ViewSpec is one parsed view spec.
type ViewSpec struct {
	Name   string
	Split  string // "" (every graph), "{fold}", or a split file
	Set    string // "all", "training", "valid" or "test"
	Policy string // schedule text; "" for the default
}

// ParseViewSpec reads NAME=SUBSET[:POLICY] (the package comment).
func ParseViewSpec(s string) (ViewSpec, error) {
	name, rest, ok := strings.Cut(strings.TrimSpace(s), "=")
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return ViewSpec{}, fmt.Errorf("--view %q: want NAME=all[:POLICY], NAME={fold}:training|test[:POLICY] or NAME=SPLITFILE:training|valid|test[:POLICY]", s)
	}
	if !loader.ValidViewName(name) {
		return ViewSpec{}, fmt.Errorf("--view %q: the name %q: use at most %d letters, digits, '_', '-' or '.', not starting with '.'", s, name, wire.MaxViewName)
	}
	v := ViewSpec{Name: name}
	if rest == "all" || strings.HasPrefix(rest, "all:") {
		v.Set = "all"
		v.Policy = strings.TrimPrefix(strings.TrimPrefix(rest, "all"), ":")
		return v, nil
	}
	split, after, ok := strings.Cut(rest, ":")
	set, policy, _ := strings.Cut(after, ":")
	if !ok || split == "" || (set != SetTraining && set != SetTest && set != SetValid) || (split == "{fold}" && set == SetValid) {
		return ViewSpec{}, fmt.Errorf("--view %q: the subset is all, {fold}:training, {fold}:test, or a split file's :training, :valid or :test", s)
	}
	v.Split, v.Set, v.Policy = split, set, strings.TrimSpace(policy)
	return v, nil
}

// ReadViews reads a views file: one spec a line, '#' comments.
func ReadViews(path string) ([]string, error) {
	b, err := iox.ReadRegular(path, 64<<20)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no view", path)
	}
	return out, nil
}

// BuildViews applies o's defaults, checks it, opens the shards once and
// builds every view's loaders.
func BuildViews(ctx context.Context, o LoaderOptions) (*Built, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	specs, notes, err := o.specs()
	if err != nil {
		return nil, err
	}
	st, err := openStore(ctx, o)
	if err != nil {
		return nil, err
	}
	r, err := shard.OpenStore(ctx, st, shard.WithCacheLimit(o.CacheLimit))
	if err != nil {
		closeStore(st)
		return nil, err
	}
	if r.Manifest().Structures != nil && o.Policy == "" && o.ScheduleFile == "" {
		// Structures take no graph policy: none, unless one was given (and
		// refused by the loader).
		o.Policy = "none"
		if specs, notes, err = o.specs(); err != nil {
			r.Close()
			closeStore(st)
			return nil, err
		}
	}
	b := &Built{Reader: r, Notes: notes, Store: st}
	if _, err := r.GraphSizes(); o.CacheLimit > 0 && errors.Is(err, shard.ErrNoSizes) {
		b.Notes = append(b.Notes, fmt.Sprintf("%s has no graph-size index (written before it): every shard is read once at start to "+
			"size the graphs; convert it again with this shardconv for a start that reads only the shards it serves first", o.Shards))
	}
	if b.Shuffle, b.noIndex, err = o.cachePlan(r, &b.Notes); err != nil {
		b.Close()
		return nil, err
	}
	if err := b.build(ctx, o, specs); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// specs turns the options into view specs, applying the defaults.
func (o LoaderOptions) specs() ([]ViewSpec, []string, error) {
	var specs []ViewSpec
	if len(o.Views) == 0 {
		// The daemon's one view: --policy (or --schedule) is its own, so an
		// explicit one applies to a test set too (then --augment-test is
		// needed).
		v := ViewSpec{Name: "", Set: "all", Policy: o.Policy}
		if o.SplitFile != "" {
			v.Split, v.Set = o.SplitFile, o.SplitSet
		}
		specs = append(specs, v)
	}
	for _, s := range o.Views {
		v, err := ParseViewSpec(s)
		if err != nil {
			return nil, nil, err
		}
		specs = append(specs, v)
	}
	var notes []string
	for i := range specs {
		v := &specs[i]
		label := "view " + v.Name
		if v.Name == "" {
			label = "the served set"
		}
		switch {
		case v.Policy != "":
		case len(o.Views) == 0 && o.ScheduleFile != "": // the daemon's one view takes --schedule
		case v.Set == SetTest || v.Set == SetValid:
			v.Policy = "none"
			notes = append(notes, fmt.Sprintf("%s is a %s set: policy none (give one explicitly, with --augment-test, to augment it)", label, v.Set))
		case o.ScheduleFile != "":
		case o.Policy != "":
			v.Policy = o.Policy
		default:
			v.Policy = DefaultPolicy
			notes = append(notes, fmt.Sprintf("%s: policy %s, the default (--policy none serves it unaugmented)", label, DefaultPolicy))
		}
	}
	return specs, notes, nil
}

func (o LoaderOptions) schedule(v ViewSpec) (*epoch.Schedule, error) {
	if v.Policy == "" && o.ScheduleFile != "" {
		f, err := iox.OpenRegular(o.ScheduleFile)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		s, err := epoch.ReadSchedule(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.ScheduleFile, err)
		}
		return s, nil
	}
	s, err := epoch.ParseSchedule(v.Policy)
	if err != nil {
		return nil, fmt.Errorf("policy %q: %w", v.Policy, err)
	}
	return s, nil
}

func (b *Built) build(ctx context.Context, o LoaderOptions, specs []ViewSpec) error {
	all, err := loader.NewSourceContext(ctx, b.Reader, nil)
	if err != nil {
		return err
	}
	if o.EdgeFill != "" {
		if err := all.ParseEdgeFill(o.EdgeFill); err != nil {
			return fmt.Errorf("--edge-fill: %w", err)
		}
	}
	mem := loader.NewMemory(o.MemoryBudget)
	n := int64(b.Reader.NumGraphs())
	var twins [][]*epoch.Schedule
	for _, t := range o.Twins {
		set, err := epoch.ParseTwinSet(t, wire.MaxTwins)
		if err != nil {
			return fmt.Errorf("--twins: %w", err)
		}
		if len(twins) > 0 && len(set) != len(twins[0]) {
			return fmt.Errorf("--twins %q: %d twins, and the first set has %d: every set has as many", t, len(set), len(twins[0]))
		}
		twins = append(twins, set)
	}
	if len(twins) > wire.MaxTwinSets {
		return fmt.Errorf("--twins: %d sets (at most %d)", len(twins), wire.MaxTwinSets)
	}
	var folds []*epoch.Split
	var views []*loader.View
	for _, v := range specs {
		sched, err := o.schedule(v)
		if err != nil {
			return err
		}
		if (v.Set == SetTest || v.Set == SetValid) && sched.Augments() && !o.AugmentTest {
			return fmt.Errorf("view %q serves a "+v.Set+" set with the augmenting schedule %q: pass --augment-test if that is meant", v.Name, sched.String())
		}
		viewTwins := twins
		if (v.Set == SetTest || v.Set == SetValid) && !o.AugmentTest {
			viewTwins = nil // a held-out set gets augmented copies only when asked
		}
		var sets [][]int64
		switch v.Split {
		case "":
			sets = [][]int64{nil}
		case "{fold}":
			if folds == nil {
				if o.Folds == "" {
					return fmt.Errorf("view %q uses {fold}: give --folds", v.Name)
				}
				files, err := epoch.FoldFiles(o.Folds)
				if err != nil {
					return err
				}
				for _, f := range files {
					sp, err := epoch.ReadSplit(f, n)
					if err != nil {
						return err
					}
					folds = append(folds, sp)
				}
			}
			for _, sp := range folds {
				sets = append(sets, pick(sp, v.Set))
			}
		default:
			sp, err := epoch.ReadSplit(v.Split, n)
			if err != nil {
				return err
			}
			sets = [][]int64{pick(sp, v.Set)}
		}
		w := &loader.View{Name: v.Name, Set: v.Set, PerFold: v.Split == "{fold}"}
		for i, served := range sets {
			if served != nil && len(served) == 0 {
				return fmt.Errorf("view %q: the %s set of fold %d is empty", v.Name, v.Set, i)
			}
			src := all
			if served != nil {
				if src, err = all.Subset(served); err != nil {
					return err
				}
			}
			l, err := loader.New(src, loader.Config{
				Seed: o.Seed, Schedule: sched, Workers: o.Workers, BatchSize: o.BatchSize,
				Remainder: o.Remainder, NodeBudget: o.NodeBudget, EdgeBudget: o.EdgeBudget, Balanced: o.Balanced,
				MaxEpoch: o.MaxEpoch, NoIndex: o.NoIndex || b.noIndex, Memory: mem, PPRCache: o.PPRCache,
				Shuffle: b.Shuffle, Twins: viewTwins, Structures: o.Structures,
			})
			if err != nil {
				return err
			}
			if ids, need, op := l.Oversize(); len(ids) > 0 {
				sz := l.Source().Size(ids[0])
				b.Notes = append(b.Notes, fmt.Sprintf("%s: graph %d (%d nodes, %d edges) needs about %s of working memory to augment with %s, "+
					"more than --memory-budget allows (%s); requests whose batches hold it are refused (%d such graphs in all): raise --memory-budget, or leave them out",
					viewLabel(v.Name, i, len(sets)), ids[0], sz.Nodes, sz.Edges, mib(need), op, mib(mem.WorkLimit()), len(ids)))
			}
			w.Folds = append(w.Folds, l)
		}
		views = append(views, w)
	}
	if b.Views, err = loader.NewViews(views, ""); err != nil {
		return err
	}
	b.Loader = views[0].Folds[0]
	return nil
}

// viewLabel names a view (and fold) in the log.
func viewLabel(name string, fold, folds int) string {
	switch {
	case name == "":
		return "the served set"
	case folds > 1:
		return fmt.Sprintf("view %s, fold %d", name, fold)
	}
	return "view " + name
}

func pick(sp *epoch.Split, set string) []int64 {
	ids, _ := sp.Set(set)
	return ids
}
