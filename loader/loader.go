package loader

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/wire"
)

// Loader serves augmented epochs of one Source.
type Loader struct {
	src *Source
	cfg Config
	id  wire.Config
	// twins is the declared twin sets' canonical form (wire.Config.Twins).
	twins string
	// collators holds batch buffers between batches and requests (see
	// collator): a steady stream allocates none.
	collators sync.Pool
	// workers holds workers' buffers (scratch, graphs) between streams:
	// each stream's workers start warm (newWorker).
	workers sync.Pool
	// st: the source holds structures (format 4), served so.
	st *structures
}

// New checks cfg and returns a Loader.
func New(src *Source, cfg Config) (*Loader, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.NoIndex && slices.ContainsFunc(cfg.schedules(), (*epoch.Schedule).UsesIndex) {
		src.EnablePPRCache(cfg.PPRCache)
		src.EnableIndex()
	}
	if w := cfg.Shuffle.Window; w > 0 && slices.ContainsFunc(cfg.schedules(), (*epoch.Schedule).Mixes) {
		if err := src.windowsPair(w); err != nil {
			return nil, err
		}
	}
	st, err := newStructures(src.Manifest(), cfg.Structures)
	if err != nil {
		return nil, err
	}
	if st != nil && (cfg.Schedule.Augments() || len(cfg.Twins) > 0) {
		return nil, fmt.Errorf("loader: %s holds structures: graph policies and twins do not apply (serve it with policy none; structures take --rotate and --noise)", src.Manifest().Dataset)
	}
	l := &Loader{src: src, cfg: cfg, st: st}
	l.id = wire.Config{
		Dataset: src.Manifest().Dataset, ShardsSHA256: src.ds.r.Digest(),
		Served: len(src.served), ServedSHA256: src.digest,
		Seed: cfg.Seed, Schedule: cfg.Schedule.Canonical(), BatchSize: cfg.BatchSize,
		NodeBudget: cfg.NodeBudget, EdgeBudget: cfg.EdgeBudget, Balanced: cfg.Balanced, Remainder: string(cfg.Remainder),
		EdgeFill: src.edgeFillID(),
	}
	if cfg.Shuffle.Window > 0 {
		l.id.Shuffle = cfg.Shuffle.String()
	}
	if st != nil {
		l.id.Structures = st.info.Augment + ";cutoff=" + strconv.FormatFloat(st.cutoff, 'g', -1, 64)
	}
	l.id = l.id.WithID()
	if len(cfg.Twins) > 0 {
		canon := make([][]string, len(cfg.Twins))
		for i, set := range cfg.Twins {
			for _, sch := range set {
				canon[i] = append(canon[i], sch.Canonical())
			}
		}
		b, _ := json.Marshal(canon)
		l.twins = string(b)
	}
	return l, nil
}

// Twins is the number of twins a twin request gets (0: the loader serves
// none).
func (l *Loader) Twins() int {
	if len(l.cfg.Twins) == 0 {
		return 0
	}
	return len(l.cfg.Twins[0])
}

// Identity is the configuration's identity: every setting that changes
// the bytes of a request (wire.Config), echoed in every response.
func (l *Loader) Identity() wire.Config { return l.id }

// Config returns the validated configuration.
func (l *Loader) Config() Config { return l.cfg }

// Source returns the loader's source.
func (l *Loader) Source() *Source { return l.src }
