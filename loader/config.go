package loader

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/wire"
)

// MaxBatchSize is the default cap on graphs per batch.
const MaxBatchSize = 1 << 16

// Config configures a Loader. Zero values take the stated defaults
// (EnsureDefaults); New checks it (Validate).
type Config struct {
	Seed     uint64
	Schedule *epoch.Schedule // required
	// Workers augmenting in parallel; default GOMAXPROCS.
	Workers int
	// Window caps batches in flight (being built or waiting to be sent);
	// default 2×Workers. It bounds memory whatever the consumer's speed.
	Window int
	// BatchSize is the default graphs per batch; default 32.
	BatchSize int
	// MaxBatchSize caps what a request may ask; default 65536.
	MaxBatchSize int
	// NodeBudget and EdgeBudget, when set, also cap a batch's nodes/edges.
	NodeBudget, EdgeBudget int
	// Balanced cuts the epoch into steps of one batch per rank under the
	// budgets, each step's batches within one graph's nodes of each other
	// (epoch.BalancedSlice): every rank gets as many batches, which DDP
	// needs. Without it a rank cuts its own slice, and under a budget
	// ranks may get different counts.
	Balanced bool
	// Remainder: pad (default) or drop when the served set does not divide
	// by the world size.
	Remainder epoch.Remainder
	// MaxEpoch, when set, refuses epochs ≥ MaxEpoch.
	MaxEpoch uint64
	// Mem allocates the few Arrow buffers not taken from Go slices.
	Mem memory.Allocator
	// NoIndex keeps graphs unindexed even when the schedule uses NodeSam
	// (saves up to 4 int32 per edge of memory; NodeSam then scans each draw).
	NoIndex bool
	// Memory bounds the bytes of batches in flight across every stream of
	// every Loader sharing it; default a budget of DefaultMemory of its own.
	Memory *Memory
	// PPRCache, when positive, lets SubMix keep up to this many bytes of
	// PageRank rankings for the dataset (aug.PPRCache); ignored with
	// NoIndex.
	PPRCache int64
	// Shuffle draws each pass's order: global (the zero value) or windows
	// of page blocks (epoch.Shuffle), SubMix then drawing its partner
	// from the target's window.
	Shuffle epoch.Shuffle
	// Twins are the twin sets a request with twins draws from
	// (wire.Request.Twins; docs/protocol.md, "Twins"): each a schedule per
	// twin, every set as long (2..wire.MaxTwins), at most
	// wire.MaxTwinSets. None: the loader serves no twins.
	Twins [][]*epoch.Schedule
	// Structures say what a daemon serving 3D atomistic structures (format
	// 4 shards) does to them: rotations, position noise, the served
	// cutoff. Graph schedules do not apply to structures (the schedule is
	// then none).
	Structures StructureConfig
}

// twinSchedules lists every schedule of every twin set.
func (c *Config) twinSchedules() []*epoch.Schedule {
	var out []*epoch.Schedule
	for _, set := range c.Twins {
		out = append(out, set...)
	}
	return out
}

// schedules is every schedule a request can be served under: the main
// one, then each twin set's. The one list the index decision, the SubMix
// window check and Oversize read.
func (c *Config) schedules() []*epoch.Schedule {
	return append([]*epoch.Schedule{c.Schedule}, c.twinSchedules()...)
}

// EnsureDefaults fills the settings left at their zero value.
func (c *Config) EnsureDefaults() {
	if c.Workers == 0 {
		c.Workers = runtime.GOMAXPROCS(0)
	}
	if c.Window == 0 {
		c.Window = 2 * max(c.Workers, 1)
	}
	if c.BatchSize == 0 {
		c.BatchSize = 32
	}
	if c.MaxBatchSize == 0 {
		c.MaxBatchSize = MaxBatchSize
	}
	if c.Remainder == "" {
		c.Remainder = epoch.Pad
	}
	if c.Mem == nil {
		c.Mem = memory.DefaultAllocator
	}
	if c.Memory == nil {
		c.Memory = NewMemory(0)
	}
}

// Validate checks the configuration (after EnsureDefaults) and reports
// every problem at once. Zero means the default; a negative value is a
// caller's mistake, not a request for the default.
func (c *Config) Validate() error {
	var errs []error
	if c.Schedule == nil {
		errs = append(errs, errors.New("loader: a schedule is required"))
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"workers", c.Workers}, {"window", c.Window}, {"batch size", c.BatchSize}, {"max batch size", c.MaxBatchSize},
		{"node budget", c.NodeBudget}, {"edge budget", c.EdgeBudget}} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("loader: %s %d is negative", f.name, f.v))
		}
	}
	if c.BatchSize > c.MaxBatchSize {
		errs = append(errs, fmt.Errorf("loader: batch size %d above the maximum %d", c.BatchSize, c.MaxBatchSize))
	}
	if c.Remainder != epoch.Pad && c.Remainder != epoch.Drop {
		errs = append(errs, fmt.Errorf("loader: remainder %q (want pad or drop)", c.Remainder))
	}
	if c.PPRCache < 0 {
		errs = append(errs, fmt.Errorf("loader: ppr cache %d bytes is negative", c.PPRCache))
	}
	if c.Shuffle.Window < 0 {
		errs = append(errs, fmt.Errorf("loader: shuffle window %d is negative", c.Shuffle.Window))
	}
	if len(c.Twins) > wire.MaxTwinSets {
		errs = append(errs, fmt.Errorf("loader: %d twin sets (at most %d)", len(c.Twins), wire.MaxTwinSets))
	}
	for i, set := range c.Twins {
		if len(set) < 2 || len(set) > wire.MaxTwins || len(set) != len(c.Twins[0]) {
			errs = append(errs, fmt.Errorf("loader: twin set %d has %d schedules: every set has the same 2 to %d", i, len(set), wire.MaxTwins))
		}
	}
	if c.Balanced && c.NodeBudget == 0 && c.EdgeBudget == 0 {
		errs = append(errs, errors.New("loader: balanced batches need a node (atom) or edge budget"))
	}
	if c.Shuffle.Window == 0 && c.Shuffle.Bytes > 0 {
		errs = append(errs, fmt.Errorf("loader: shuffle %s: a window by size must be turned into pages first (app.LoaderOptions does)", c.Shuffle))
	}
	return errors.Join(errs...)
}
