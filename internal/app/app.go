// Package app builds augloader's pieces from command-line settings: the
// loader behind `serve` and `materialize`, shared so both apply the same
// defaults and checks.
package app

import (
	"context"
	"fmt"
	"os"

	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/loader"
	"github.com/augloader/augloader/shard"
)

// LoaderOptions are the common flags of serve and materialize.
type LoaderOptions struct {
	Shards       string
	Seed         uint64
	Policy       string // schedule text; ignored when ScheduleFile is set
	ScheduleFile string
	Workers      int
	BatchSize    int
	SplitFile    string
	SplitSet     string // training or test
	Remainder    string
	NodeBudget   int
	EdgeBudget   int
	MaxEpoch     uint64 // refuse epochs ≥ MaxEpoch (0: no limit)
	NoIndex      bool   // keep graphs unindexed (less memory, slower NodeSam)
	// MemoryBudget bounds the bytes of batches in flight across every
	// stream (loader.Memory); 0: loader.DefaultMemory.
	MemoryBudget int64
}

// Built is an open loader and what it needs closed.
type Built struct {
	Reader       *shard.Reader
	Loader       *loader.Loader
	ScheduleText string
}

// Close releases the shard reader.
func (b *Built) Close() error { return b.Reader.Close() }

// BuildLoader opens the shards and builds the loader.
func BuildLoader(ctx context.Context, o LoaderOptions) (*Built, error) {
	var sched *epoch.Schedule
	var err error
	if o.ScheduleFile != "" {
		f, ferr := os.Open(o.ScheduleFile)
		if ferr != nil {
			return nil, ferr
		}
		sched, err = epoch.ReadSchedule(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.ScheduleFile, err)
		}
	} else {
		if sched, err = epoch.ParseSchedule(o.Policy); err != nil {
			return nil, fmt.Errorf("--policy %q: %w", o.Policy, err)
		}
	}
	r, err := shard.Open(ctx, o.Shards)
	if err != nil {
		return nil, err
	}
	var served []int64
	if o.SplitFile != "" {
		sp, err := epoch.ReadSplit(o.SplitFile, int64(r.NumGraphs()))
		if err != nil {
			r.Close()
			return nil, err
		}
		switch o.SplitSet {
		case "", "training":
			served = sp.Training
		case "test":
			served = sp.Test
		default:
			r.Close()
			return nil, fmt.Errorf("--split-set %q: want training or test", o.SplitSet)
		}
		if len(served) == 0 {
			r.Close()
			return nil, fmt.Errorf("%s: the %s set is empty", o.SplitFile, o.SplitSet)
		}
	}
	src, err := loader.NewSource(r, served)
	if err != nil {
		r.Close()
		return nil, err
	}
	l, err := loader.New(src, loader.Config{
		Seed: o.Seed, Schedule: sched, Workers: o.Workers, BatchSize: o.BatchSize,
		Remainder: epoch.Remainder(o.Remainder), NodeBudget: o.NodeBudget, EdgeBudget: o.EdgeBudget,
		MaxEpoch: o.MaxEpoch, NoIndex: o.NoIndex, Memory: loader.NewMemory(o.MemoryBudget),
	})
	if err != nil {
		r.Close()
		return nil, err
	}
	return &Built{Reader: r, Loader: l, ScheduleText: sched.String()}, nil
}
