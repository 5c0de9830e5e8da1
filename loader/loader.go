package loader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/augloader/augloader/aug"
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
	if c.Shuffle.Window == 0 && c.Shuffle.Bytes > 0 {
		errs = append(errs, fmt.Errorf("loader: shuffle %s: a window by size must be turned into pages first (app.LoaderOptions does)", c.Shuffle))
	}
	return errors.Join(errs...)
}

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
	l := &Loader{src: src, cfg: cfg}
	l.id = wire.Config{
		Dataset: src.Manifest().Dataset, ShardsSHA256: src.ds.r.Digest(),
		Served: len(src.served), ServedSHA256: src.digest,
		Seed: cfg.Seed, Schedule: cfg.Schedule.Canonical(), BatchSize: cfg.BatchSize,
		NodeBudget: cfg.NodeBudget, EdgeBudget: cfg.EdgeBudget, Remainder: string(cfg.Remainder),
		EdgeFill: src.edgeFillID(),
	}
	if cfg.Shuffle.Window > 0 {
		l.id.Shuffle = cfg.Shuffle.String()
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

// Plan is a request's batches, from StartBatch on.
type Plan struct {
	Request wire.Request
	Batches [][]epoch.Item
	Total   int // batches in the whole rank slice (before StartBatch)
	Policy  *epoch.Policy
	Schema  *arrow.Schema
	// Bytes[i] bounds batch i's collated size and the working memory of
	// its largest graph (the Memory it holds).
	Bytes []int64
	// Work[i] bounds what augmenting batch i's largest graph allocates.
	Work []int64
	// The code widths of the x_cat and edge_cat columns (bytes).
	nodeWidth, edgeWidth int
	// Index[i] is Batches[i]'s index in the rank's epoch.
	Index []int
	// Compression of record batch bodies in WriteStream.
	Compression wire.Compression
	// OverBudget lists the batches (indices in the rank's epoch) made of
	// one graph whose bound alone exceeds the node or edge budget.
	OverBudget []int
	// Identity is the configuration's identity as this request's bytes
	// depend on it: the loader's, and a twin request's sets and weights.
	Identity wire.Config
	// Twins is the copies of each graph a batch holds (0: a plain stream).
	Twins int
	// pols are the policies of every pass but those of passPolicies
	// (Policy standing for pols.main).
	pols *policies
	// passPolicies, under a windowed shuffle, is the policies of each
	// pass the plan draws from: its SubMix draws partners in that pass's
	// windows. Empty: pols serves every pass.
	passPolicies []passPolicy
	// twinCum is the cumulative weights of the twin sets (epoch.Pick).
	twinCum []float64
}

// policies are one pass's resolved schedules: the view's, and under a twin
// request every twin set's, a policy per twin.
type policies struct {
	main  *epoch.Policy
	twins [][]*epoch.Policy
}

type passPolicy struct {
	pass uint64
	pol  *policies
}

// policiesOf returns the policies of the items drawn in pass: a windowed
// pass's own, else Policy (which a caller may replace) and pols' twins.
func (p *Plan) policiesOf(pass uint64) (*epoch.Policy, [][]*epoch.Policy) {
	for _, pp := range p.passPolicies {
		if pp.pass == pass {
			return pp.pol.main, pp.pol.twins
		}
	}
	return p.Policy, p.pols.twins
}

// ops returns the op of each copy of it into buf (drawOps with the
// policies of its pass).
func (p *Plan) ops(seed uint64, it epoch.Item, buf *[wire.MaxTwins]aug.Op) []aug.Op {
	main, twins := p.policiesOf(it.Pass)
	return drawOps(main, twins, p.Twins, p.twinCum, seed, it, buf)
}

// drawOps returns the op of each copy of it into buf: main's draw for a
// plain stream (k 0); under k twins, the draw of one twin set
// (StreamTwinChoice over the cumulative weights cum) and each twin t's op
// of that set's schedule t, drawn from its own stream (aug.TwinStride).
func drawOps(main *epoch.Policy, twins [][]*epoch.Policy, k int, cum []float64, seed uint64, it epoch.Item, buf *[wire.MaxTwins]aug.Op) []aug.Op {
	if k == 0 {
		buf[0] = main.Choose(seed, it.Pass, it.Graph)
		return buf[:1]
	}
	set := 0
	if len(cum) > 1 {
		set = epoch.Pick(cum, seed, it.Pass, it.Graph, aug.StreamTwinChoice)
	}
	for t := range k {
		buf[t] = twins[set][t].ChooseStream(seed, it.Pass, it.Graph, aug.StreamPolicyChoice+uint64(t)*aug.TwinStride)
	}
	return buf[:k]
}

// resolve builds the policies of epoch e (SubMix's partners from partners).
func (l *Loader) resolve(req wire.Request, e uint64, partners aug.Partners) (*policies, error) {
	main, err := l.cfg.Schedule.Resolve(e, partners)
	if err != nil {
		return nil, err
	}
	pols := &policies{main: main}
	if req.Twins > 0 {
		for _, set := range l.cfg.Twins {
			var tw []*epoch.Policy
			for _, sch := range set {
				pol, err := sch.Resolve(e, partners)
				if err != nil {
					return nil, err
				}
				tw = append(tw, pol)
			}
			pols.twins = append(pols.twins, tw)
		}
	}
	return pols, nil
}

// checkTwins checks a request's twins against the declared sets and
// returns the sets' cumulative weights and the identity saying them.
func (l *Loader) checkTwins(req wire.Request) ([]float64, wire.Config, error) {
	id := l.id
	if req.Twins == 0 {
		return nil, id, nil
	}
	k := l.Twins()
	switch {
	case k == 0:
		return nil, id, fmt.Errorf("%w: twins %d asked, and this view serves no twins (the daemon declares twin sets with --twins 'A / B'; a test or valid set gets them only with --augment-test)", epoch.ErrRange, req.Twins)
	case req.Twins != k:
		return nil, id, fmt.Errorf("%w: twins %d asked, and this daemon's twin sets are of %d", epoch.ErrRange, req.Twins, k)
	case len(req.TwinWeights) > 0 && len(req.TwinWeights) != len(l.cfg.Twins):
		return nil, id, fmt.Errorf("%w: %d twin weights for the daemon's %d twin sets (one a set, in the order declared)", epoch.ErrRange, len(req.TwinWeights), len(l.cfg.Twins))
	}
	w := req.TwinWeights
	if len(w) == 0 {
		w = make([]float64, len(l.cfg.Twins))
		for i := range w {
			w[i] = 1
		}
	}
	cum, err := epoch.Cumulative(w)
	if err != nil {
		return nil, id, fmt.Errorf("%w: %v", epoch.ErrRange, err)
	}
	var sum float64
	for _, x := range w {
		sum += x
	}
	norm := make([]string, len(w))
	for i, x := range w {
		norm[i] = strconv.FormatFloat(x/sum, 'g', -1, 64)
	}
	id.Twins, id.TwinWeights = l.twins, strings.Join(norm, ",")
	return cum, id.WithID(), nil
}

// Graphs counts the graphs in the plan.
func (p *Plan) Graphs() int {
	n := 0
	for _, b := range p.Batches {
		n += len(b)
	}
	return n
}

// MaxBatchesPerEpoch caps a request's batches_per_epoch.
const MaxBatchesPerEpoch = 1 << 24

// Plan validates req (errors wrap epoch.ErrRange) and cuts its batches.
func (l *Loader) Plan(req wire.Request) (*Plan, error) {
	if req.World == 0 {
		req.World = 1
	}
	if req.BatchSize == 0 {
		req.BatchSize = l.cfg.BatchSize
	}
	if req.Stride == 0 {
		req.Stride = 1
	}
	switch {
	case req.BatchSize < 0 || req.BatchSize > l.cfg.MaxBatchSize:
		return nil, fmt.Errorf("%w: batch size %d not in 1..%d", epoch.ErrRange, req.BatchSize, l.cfg.MaxBatchSize)
	case req.World < 1 || req.World > len(l.src.served) || req.Rank < 0 || req.Rank >= req.World:
		return nil, fmt.Errorf("%w: rank %d of world size %d (served set: %d graphs)", epoch.ErrRange, req.Rank, req.World, len(l.src.served))
	case l.cfg.MaxEpoch > 0 && req.Epoch >= l.cfg.MaxEpoch:
		return nil, fmt.Errorf("%w: epoch %d, the server offers 0..%d", epoch.ErrRange, req.Epoch, l.cfg.MaxEpoch-1)
	case req.StartBatch < 0 || req.Stride < 1 || req.Count < 0:
		return nil, fmt.Errorf("%w: start batch %d, stride %d, count %d", epoch.ErrRange, req.StartBatch, req.Stride, req.Count)
	case req.BatchesPerEpoch < 0 || req.BatchesPerEpoch > MaxBatchesPerEpoch:
		return nil, fmt.Errorf("%w: batches per epoch %d not in 0..%d", epoch.ErrRange, req.BatchesPerEpoch, MaxBatchesPerEpoch)
	case req.BatchesPerEpoch > 0 && len(req.Resume) > 0:
		return nil, fmt.Errorf("%w: resume phases with batches_per_epoch: an epoch of fixed batches resumes at the same world size with start_batch", epoch.ErrRange)
	case req.BatchesPerEpoch > 0 && req.Epoch > (1<<62)/uint64(req.BatchesPerEpoch):
		return nil, fmt.Errorf("%w: epoch %d with %d batches per epoch", epoch.ErrRange, req.Epoch, req.BatchesPerEpoch)
	}
	twinCum, ident, err := l.checkTwins(req)
	if err != nil {
		return nil, err
	}
	pols, err := l.resolve(req, req.Epoch, l.src)
	if err != nil {
		return nil, err
	}
	var batches [][]epoch.Item
	var bounds [][]aug.Size
	var passes []passPolicy
	if req.BatchesPerEpoch == 0 {
		// One pass: the epoch's permutation, its draws keyed by the epoch.
		var pp *passPolicy
		batches, bounds, pp, err = l.cutPass(req, req.Epoch, pols, twinCum, nil)
		if pp != nil {
			passes = append(passes, *pp)
		}
	} else {
		batches, bounds, passes, err = l.fixedEpoch(req, pols, twinCum)
	}
	if err != nil {
		return nil, err
	}
	if req.StartBatch > len(batches) {
		return nil, fmt.Errorf("%w: start batch %d, the rank has %d batches", epoch.ErrRange, req.StartBatch, len(batches))
	}
	si := l.src.schemaInfo(req)
	si.Twins = req.Twins
	p := &Plan{Request: req, Total: len(batches), Policy: pols.main, pols: pols, passPolicies: passes, Schema: wire.BatchSchema(si),
		nodeWidth: wire.CodeWidth(si.NodeVocab), edgeWidth: wire.CodeWidth(si.EdgeVocab),
		Identity: ident, Twins: req.Twins, twinCum: twinCum}
	lay := l.src.Layout()
	budget := epoch.Budget{Graphs: req.BatchSize, Nodes: l.cfg.NodeBudget, Edges: l.cfg.EdgeBudget}
	limit := l.cfg.Memory.WorkLimit()
	for bi := req.StartBatch; bi < len(batches) && (req.Count == 0 || len(p.Batches) < req.Count); bi += req.Stride {
		b := batches[bi]
		if len(b) == 1 && budget.Over(bounds[bi][0].Nodes, bounds[bi][0].Edges) {
			p.OverBudget = append(p.OverBudget, bi)
		}
		// One worker augments a batch's graphs one after the other: the
		// batch holds its largest graph's working memory. A graph whose
		// working memory exceeds the whole budget could never be built
		// within it: the request is refused before anything is sent,
		// naming it, and the daemon lives on.
		var work int64
		var buf [wire.MaxTwins]aug.Op
		for _, it := range b {
			for _, op := range p.ops(l.cfg.Seed, it, &buf) {
				w := l.src.Work(op, it.Graph)
				if w > limit {
					sz := l.src.Size(it.Graph)
					partner := ""
					if id := op.Spec().ID; id == aug.OpSubMix || id == aug.OpSubMixBase {
						partner = fmt.Sprintf(" (its partner may be the served set's largest graph (%d nodes, %d edges))", l.src.maxNodes, l.src.maxEdges)
					}
					return nil, fmt.Errorf("%w: graph %d (%d nodes, %d edges) needs about %d MiB of working memory to augment with %s%s, more than the daemon's memory budget allows (%d MiB, --memory-budget): raise it, or serve a set without that graph",
						epoch.ErrRange, it.Graph, sz.Nodes, sz.Edges, (w+(1<<20)-1)>>20, op.Spec().Name, partner, limit>>20)
				}
				work = max(work, w)
			}
		}
		p.Batches = append(p.Batches, b)
		p.Index = append(p.Index, bi)
		// A twin batch's bounds sum its copies' sizes; each copy's row
		// costs what a graph's does.
		rows := int64(max(req.Twins, 1)-1) * int64(len(b)) * batchBytes([]aug.Size{{}}, &lay, p.nodeWidth, p.edgeWidth)
		p.Bytes = append(p.Bytes, batchBytes(bounds[bi], &lay, p.nodeWidth, p.edgeWidth)+rows+work)
		p.Work = append(p.Work, work)
	}
	return p, nil
}

// Oversize lists the served graphs whose working memory under some op of
// the schedule or of a twin schedule exceeds what one graph may take (Memory.WorkLimit): requests whose batches hold one are refused (Plan). The
// daemon says so at start. need is the first one's working memory, op the
// op that needs it.
func (l *Loader) Oversize() (ids []int64, need int64, op string) {
	var ops []aug.Op
	for _, s := range l.cfg.schedules() {
		o, err := s.Ops(l.src)
		if err != nil {
			return nil, 0, ""
		}
		ops = append(ops, o...)
	}
	limit := l.cfg.Memory.WorkLimit()
	for _, id := range l.src.served {
		for _, o := range ops {
			if w := l.src.Work(o, id); w > limit {
				if len(ids) == 0 {
					need, op = w, o.Spec().Name
				}
				ids = append(ids, id)
				break
			}
		}
	}
	return ids, need, op
}

// cutPass cuts the rank's part of one pass over the served set (the
// permutation keyed by pass) into batches, each graph's draws keyed by
// pass, and returns each batch's graphs' size bounds. Every graph is
// counted at the bound of the op it will get, so the budgets hold for the
// augmented batch, and the memory estimate does; bound, when set, gives
// that bound instead (fixedEpoch's, the same for every epoch).
func (l *Loader) cutPass(req wire.Request, pass uint64, pols *policies, twinCum []float64, bound func(id int64) aug.Size) ([][]epoch.Item, [][]aug.Size, *passPolicy, error) {
	var perm []int64
	var pp *passPolicy
	if w := l.cfg.Shuffle.Window; w > 0 {
		r := l.src.ds.r
		win, err := epoch.WindowPermutation(l.cfg.Seed, pass, l.src.served, r.NumPages(), w, r.PageOf)
		if err != nil {
			return nil, nil, nil, err
		}
		perm = win.Perm
		wpol, err := l.resolve(req, req.Epoch, l.src.windowPartners(win))
		if err != nil {
			return nil, nil, nil, err
		}
		pp = &passPolicy{pass: pass, pol: wpol}
		pols = wpol
	} else {
		perm = epoch.Permutation(l.cfg.Seed, pass, l.src.served)
	}
	var items []epoch.Item
	var err error
	if len(req.Resume) > 0 {
		items, err = epoch.ResumeSlice(perm, resumePhases(req.Resume), req.Rank, req.World, l.cfg.Remainder)
	} else {
		items, err = epoch.RankSlice(perm, req.Rank, req.World, l.cfg.Remainder)
	}
	if err != nil {
		return nil, nil, nil, err
	}
	sizes := make([]aug.Size, len(items))
	var buf [wire.MaxTwins]aug.Op
	for i := range items {
		items[i].Pass = pass
		if bound != nil {
			sizes[i] = bound(items[i].Graph)
			continue
		}
		// A twin batch holds every copy: their sizes add up.
		for _, op := range drawOps(pols.main, pols.twins, req.Twins, twinCum, l.cfg.Seed, items[i], &buf) {
			b := l.src.Bound(op, items[i].Graph)
			sizes[i].Nodes += b.Nodes
			sizes[i].Edges += b.Edges
		}
	}
	budget := epoch.Budget{Graphs: req.BatchSize, Nodes: l.cfg.NodeBudget, Edges: l.cfg.EdgeBudget}
	batches, err := epoch.Batches(items, budget, func(i int) (int, int) { return sizes[i].Nodes, sizes[i].Edges })
	if err != nil {
		return nil, nil, nil, err
	}
	if req.DropLast && len(batches) > 0 && len(batches[len(batches)-1]) < req.BatchSize {
		batches = batches[:len(batches)-1]
	}
	bounds := make([][]aug.Size, len(batches))
	first := 0
	for i, b := range batches {
		bounds[i] = sizes[first : first+len(b)]
		first += len(b)
	}
	return batches, bounds, pp, nil
}

// resumePhases converts a request's resume phases for package epoch.
func resumePhases(in []wire.ResumePhase) []epoch.Phase {
	out := make([]epoch.Phase, len(in))
	for i, ph := range in {
		out[i] = epoch.Phase{World: ph.World, Graphs: ph.Graphs}
	}
	return out
}

// fixedEpoch cuts an epoch of BatchesPerEpoch batches: batches
// e·B … (e+1)·B−1 of the endless sequence of passes 0, 1, 2, … over the
// served set, each cut as cutPass cuts an epoch. Batch boundaries must not
// depend on which epoch a batch falls in, so with a node or edge budget a
// graph is counted at the largest bound any op of the schedule can give it.
func (l *Loader) fixedEpoch(req wire.Request, pols *policies, twinCum []float64) ([][]epoch.Item, [][]aug.Size, []passPolicy, error) {
	var bound func(id int64) aug.Size
	budgeted := l.cfg.NodeBudget > 0 || l.cfg.EdgeBudget > 0
	if budgeted {
		scheds, copies := []*epoch.Schedule{l.cfg.Schedule}, 1
		if req.Twins > 0 {
			scheds, copies = l.cfg.twinSchedules(), req.Twins
		}
		var ops []aug.Op
		for _, sch := range scheds {
			o, err := sch.Ops(l.src)
			if err != nil {
				return nil, nil, nil, err
			}
			ops = append(ops, o...)
		}
		// Each copy counted at the largest bound any op gives the graph.
		bound = func(id int64) aug.Size {
			var b aug.Size
			for _, op := range ops {
				s := l.src.Bound(op, id)
				b.Nodes, b.Edges = max(b.Nodes, s.Nodes), max(b.Edges, s.Edges)
			}
			return aug.Size{Nodes: b.Nodes * copies, Edges: b.Edges * copies}
		}
	}
	B := uint64(req.BatchesPerEpoch)
	want := req.Epoch * B // first global batch of the epoch
	var batches [][]epoch.Item
	var bounds [][]aug.Size
	var passes []passPolicy
	var seen uint64 // global batches before the pass
	for pass := uint64(0); uint64(len(batches)) < B; pass++ {
		if !budgeted && pass == 0 {
			// Every pass has the same number of batches: skip to the first
			// pass the epoch needs without cutting the ones before.
			pb, _, _, err := l.cutPass(req, 0, pols, twinCum, nil)
			if err != nil {
				return nil, nil, nil, err
			}
			if len(pb) == 0 {
				return nil, nil, nil, fmt.Errorf("%w: a pass of the served set holds no full batch for rank %d of %d", epoch.ErrRange, req.Rank, req.World)
			}
			per := uint64(len(pb))
			pass, seen = want/per, want/per*per
		}
		pb, pbounds, pp, err := l.cutPass(req, pass, pols, twinCum, bound)
		if err != nil {
			return nil, nil, nil, err
		}
		if len(pb) == 0 {
			return nil, nil, nil, fmt.Errorf("%w: a pass of the served set holds no full batch for rank %d of %d", epoch.ErrRange, req.Rank, req.World)
		}
		for i := range pb {
			if g := seen + uint64(i); g >= want && uint64(len(batches)) < B {
				batches = append(batches, pb[i])
				bounds = append(bounds, pbounds[i])
			}
		}
		if pp != nil {
			passes = append(passes, *pp)
		}
		seen += uint64(len(pb))
	}
	return batches, bounds, passes, nil
}

// Stats describe one streamed request.
type Stats struct {
	Batches, Graphs int
	Elapsed         time.Duration
	// WaitWorkers is time the sender waited for the next batch to be built;
	// WaitSink is time spent handing batches to the sink (the client).
	WaitWorkers, WaitSink time.Duration
	// WorkerBusy sums the workers' time building batches; WorkerIdle their
	// time waiting, for a batch to build or for room in the window (the
	// sink is behind).
	WorkerBusy, WorkerIdle time.Duration
	MaxInFlight            int
	// SubMixUnchanged counts graphs of the batches sent that SubMix left
	// unchanged, with their hard label, because the mix had no edge.
	SubMixUnchanged int
}

// GraphError names the graph whose augmentation failed (or panicked).
type GraphError struct {
	Graph  int64
	Policy string
	Err    error
}

func (e *GraphError) Error() string {
	return fmt.Sprintf("loader: graph %d, policy %s: %v", e.Graph, e.Policy, e.Err)
}

func (e *GraphError) Unwrap() error { return e.Err }

type result struct {
	rec       arrow.RecordBatch
	col       *collator // backs rec; reusable once the sink has returned
	err       error
	unchanged int // SubMix fallbacks in the batch
}

// Stream builds the plan's batches with the worker pool and hands them to
// sink strictly in order. The sink must not keep the record after it
// returns: its buffers are reused for later batches. The first error (worker, sink or ctx) stops everything.
func (l *Loader) Stream(ctx context.Context, p *Plan, sink func(arrow.RecordBatch) error) (Stats, error) {
	start := time.Now()
	var st Stats
	nb := len(p.Batches)
	workers := min(l.cfg.Workers, max(nb, 1))
	window := l.cfg.Window
	slots := make([]chan result, window) // batch b goes to slots[b%window]
	for i := range slots {
		slots[i] = make(chan result, 1)
	}
	tokens := make(chan struct{}, window) // one per batch in flight
	jobs := make(chan int)
	mem := l.cfg.Memory
	// held[b] is the Memory batch b holds, written by the dispatcher before
	// b is dispatched, released by the sender once b is sent.
	held := make([]int64, nb)
	// wake ends a dispatcher's wait for Memory once the stream has nothing
	// in flight: a stream may then always build its next batch, whatever
	// other streams' clients hold.
	var wake atomic.Pointer[context.CancelFunc]
	g, gctx := errgroup.WithContext(ctx)
	r := l.src.ds.r
	// Under a cache limit, the pages of the batch 2·window ahead are read
	// while this one is built (shard.Reader.Prefetch: only into room), and
	// a page no later batch of the stream needs is cooled once the last
	// batch needing it is sent, so a prefetch may take its room.
	ahead, lastPage := 2*window, -1
	var coolAt [][]int
	if r.Lazy() {
		last := make([]int, r.NumPages())
		for i := range last {
			last[i] = -1
		}
		for b, items := range p.Batches {
			for _, it := range items {
				last[r.PageOf(it.Graph)] = b
			}
		}
		coolAt = make([][]int, nb)
		for pg, b := range last {
			if b >= 0 {
				coolAt[b] = append(coolAt[b], pg)
			}
		}
	}
	g.Go(func() error { // dispatcher
		defer close(jobs)
		for b := 0; b < nb; b++ {
			if r.Lazy() && b+ahead < nb {
				for _, it := range p.Batches[b+ahead] {
					if pg := r.PageOf(it.Graph); pg != lastPage {
						r.Prefetch(pg)
						lastPage = pg
					}
				}
			}
			select {
			case tokens <- struct{}{}:
			case <-gctx.Done():
				return nil
			}
			if len(tokens) > 1 && b < len(p.Bytes) {
				actx, cancel := context.WithCancel(gctx)
				wake.Store(&cancel)
				if len(tokens) > 1 { // checked again: the sender may have emptied it meanwhile
					if n, err := mem.acquire(actx, p.Bytes[b]); err == nil {
						held[b] = n
					} else if gctx.Err() != nil {
						wake.Store(nil)
						cancel()
						return nil
					}
				}
				wake.Store(nil)
				cancel()
			}
			select {
			case jobs <- b:
			case <-gctx.Done():
				return nil
			}
		}
		return nil
	})
	var busy, idle atomic.Int64
	for range workers {
		g.Go(func() error {
			w := newWorker(l, p)
			waiting := time.Now()
			defer func() { idle.Add(int64(time.Since(waiting))) }()
			for b := range jobs {
				t0 := time.Now()
				idle.Add(int64(t0.Sub(waiting)))
				col, _ := l.collators.Get().(*collator)
				if col == nil {
					col = new(collator)
				}
				rec, err := w.build(gctx, col, p.Batches[b])
				waiting = time.Now()
				busy.Add(int64(waiting.Sub(t0)))
				unchanged := w.scratch.TakeUnchanged()
				if b < len(p.Work) && p.Work[b] > retainWork {
					// A large graph's scratch is not kept for the next
					// batch, which is charged only its own.
					w.scratch, w.in, w.out = aug.Scratch{}, aug.Graph{}, aug.Graph{}
				}
				select {
				case slots[b%window] <- result{rec, col, err, unchanged}:
				case <-gctx.Done():
					if rec != nil {
						rec.Release()
					}
					return nil
				}
			}
			return nil
		})
	}
	g.Go(func() error { // sender: strictly in order
		for b := 0; b < nb; b++ {
			t0 := time.Now()
			var r result
			select {
			case r = <-slots[b%window]:
			case <-gctx.Done():
				return gctx.Err()
			}
			st.MaxInFlight = max(st.MaxInFlight, len(tokens))
			t1 := time.Now()
			st.WaitWorkers += t1.Sub(t0)
			if r.err != nil {
				return r.err
			}
			err := sink(r.rec)
			st.WaitSink += time.Since(t1)
			st.Graphs += int(r.rec.NumRows()) / max(p.Twins, 1)
			st.SubMixUnchanged += r.unchanged
			r.rec.Release()
			if err != nil {
				return err
			}
			l.collators.Put(r.col) // the sink is done with its buffers
			if coolAt != nil {
				for _, pg := range coolAt[b] {
					l.src.ds.r.Cool(pg)
				}
			}
			mem.release(held[b])
			held[b] = 0
			st.Batches++
			<-tokens
			if len(tokens) <= 1 {
				if c := wake.Load(); c != nil {
					(*c)()
				}
			}
		}
		return nil
	})
	err := g.Wait()
	for _, n := range held { // batches built or dispatched, never sent
		mem.release(n)
	}
	// Drain results built after a failure.
	for _, s := range slots {
		select {
		case r := <-s:
			if r.rec != nil {
				r.rec.Release()
			}
		default:
		}
	}
	st.Elapsed = time.Since(start)
	st.WorkerBusy, st.WorkerIdle = time.Duration(busy.Load()), time.Duration(idle.Load())
	return st, err
}

// retainWork is the most working memory a worker keeps between batches:
// a batch whose largest graph needs more drops its buffers after it.
const retainWork = 16 << 20

// worker holds one goroutine's reusable buffers.
type worker struct {
	l       *Loader
	p       *Plan
	scratch aug.Scratch
	in, out aug.Graph
}

func newWorker(l *Loader, p *Plan) *worker { return &worker{l: l, p: p} }

// build augments and collates one batch. A panic inside an augmentation is
// recovered into a *GraphError naming the graph; one anywhere else in the
// batch into an error naming the batch's first graph, so a bug fails one
// request and never the daemon. A done ctx stops it between graphs (a
// graph may wait for its page to be read: a batch of a thrashing cache
// takes seconds, and a shutdown must not).
func (w *worker) build(ctx context.Context, col *collator, items []epoch.Item) (rec arrow.RecordBatch, err error) {
	defer func() {
		if p := recover(); p != nil {
			rec, err = nil, fmt.Errorf("loader: batch starting at graph %d: panic: %v", items[0].Graph, p)
		}
	}()
	col.reset(&w.l.src.ds.lay, w.p.nodeWidth, w.p.edgeWidth)
	seed := w.l.cfg.Seed
	// A twin batch is the batch's graphs once per twin, twin-major: rows
	// t·n … t·n+n−1 are twin t's, graph i of every twin the same graph.
	var buf [wire.MaxTwins]aug.Op
	for t := range max(w.p.Twins, 1) {
		for _, it := range items {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			op := w.p.ops(seed, it, &buf)[t]
			fused, err := w.augment(op, it.Graph, seed, it.Pass, aug.OpID(op)+uint64(t)*aug.TwinStride, col)
			if err != nil {
				return nil, err
			}
			col.add(&w.out, op.Spec().Name, it.Padded, fused)
		}
	}
	return col.record(w.p.Schema, w.l.cfg.Mem), nil
}

// augment applies op to graph id into w.out, drawing from stream (the
// op's id, offset for a twin). An op that can (aug.CoalescedApplier)
// writes the edges straight into col's, and augment reports it fused.
func (w *worker) augment(op aug.Op, id int64, seed, e, stream uint64, col *collator) (fused bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &GraphError{Graph: id, Policy: op.Spec().Name, Err: fmt.Errorf("panic: %v", p)}
		}
	}()
	if err := w.l.src.Load(id, &w.in); err != nil {
		return false, &GraphError{Graph: id, Policy: op.Spec().Name, Err: err}
	}
	r := w.scratch.Rand(seed, e, id, stream)
	if ca, ok := op.(aug.CoalescedApplier); ok && !w.in.HasEdgeFeatures() {
		// Edge features follow out.Edges: such a graph is collated from
		// them with its edges' ids.
		err, fused = ca.ApplyCoalesced(&w.in, &w.out, r, &w.scratch, &col.edges, col.base), true
	} else {
		err = op.Apply(&w.in, &w.out, r, &w.scratch)
	}
	if err != nil {
		return false, &GraphError{Graph: id, Policy: op.Spec().Name, Err: err}
	}
	return fused, nil
}
