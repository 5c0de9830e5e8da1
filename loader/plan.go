package loader

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/augloader/augloader/aug"
	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/wire"
)

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
	// Edges[i] bounds batch i's directed edges (both directions of its
	// graphs' bounds).
	Edges []int
	// Lender, when set, lends the batches' edge columns room in the
	// transport's buffer (WriteStream; set by the transport).
	Lender EdgeLender
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
	pass     uint64
	pol      *policies
	partners *windowPartners // the pass's windows, SubMix's partners
}

// policiesOf returns the policies of the items drawn in pass: a windowed
// pass's own, else Policy (which a caller may replace) and pols' twins.
func (p *Plan) policiesOf(pass uint64) (*epoch.Policy, [][]*epoch.Policy) {
	if pp := p.passPolicy(pass); pp != nil {
		return pp.pol.main, pp.pol.twins
	}
	return p.Policy, p.pols.twins
}

// passPolicy is pass's entry of passPolicies (nil: none, pols serves it).
func (p *Plan) passPolicy(pass uint64) *passPolicy {
	for i := range p.passPolicies {
		if p.passPolicies[i].pass == pass {
			return &p.passPolicies[i]
		}
	}
	return nil
}

// partnerPages visits the pages batch b's SubMix partners may come from:
// under a windowed shuffle, each window of a graph of b that an op mixes
// (its partner is any graph of that window), each window once.
func (p *Plan) partnerPages(seed uint64, b int, visit func(page int)) {
	var buf [wire.MaxTwins]aug.Op
	var last *windowPartners
	lastWin := int32(-1)
	for _, it := range p.Batches[b] {
		var wp *windowPartners
		if pp := p.passPolicy(it.Pass); pp != nil {
			wp = pp.partners
		}
		if wp == nil || !slices.ContainsFunc(p.ops(seed, it, &buf), func(op aug.Op) bool { return op.Spec().Mixes }) {
			continue
		}
		w := wp.windows()[it.Graph]
		if w < 0 || (wp == last && w == lastWin) {
			continue
		}
		last, lastWin = wp, w
		for _, pg := range wp.pagesOf(w) {
			visit(int(pg))
		}
	}
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
	req, err := l.checkRequest(req)
	if err != nil {
		return nil, err
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
	schema := wire.BatchSchema(si)
	if l.st != nil {
		schema = l.st.schema(req)
	}
	p := &Plan{Request: req, Total: len(batches), Policy: pols.main, pols: pols, passPolicies: passes, Schema: schema,
		nodeWidth: wire.CodeWidth(si.NodeVocab), edgeWidth: wire.CodeWidth(si.EdgeVocab),
		Identity: ident, Twins: req.Twins, twinCum: twinCum}
	for bi := req.StartBatch; bi < len(batches) && (req.Count == 0 || len(p.Batches) < req.Count); bi += req.Stride {
		if err := l.addBatch(p, bi, batches[bi], bounds[bi]); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// checkRequest fills a request's defaults and checks its ranges.
func (l *Loader) checkRequest(req wire.Request) (wire.Request, error) {
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
		return req, fmt.Errorf("%w: batch size %d not in 1..%d", epoch.ErrRange, req.BatchSize, l.cfg.MaxBatchSize)
	case req.World < 1 || req.World > len(l.src.served) || req.Rank < 0 || req.Rank >= req.World:
		return req, fmt.Errorf("%w: rank %d of world size %d (served set: %d graphs)", epoch.ErrRange, req.Rank, req.World, len(l.src.served))
	case l.cfg.MaxEpoch > 0 && req.Epoch >= l.cfg.MaxEpoch:
		return req, fmt.Errorf("%w: epoch %d, the server offers 0..%d", epoch.ErrRange, req.Epoch, l.cfg.MaxEpoch-1)
	case req.StartBatch < 0 || req.Stride < 1 || req.Count < 0:
		return req, fmt.Errorf("%w: start batch %d, stride %d, count %d", epoch.ErrRange, req.StartBatch, req.Stride, req.Count)
	case req.BatchesPerEpoch < 0 || req.BatchesPerEpoch > MaxBatchesPerEpoch:
		return req, fmt.Errorf("%w: batches per epoch %d not in 0..%d", epoch.ErrRange, req.BatchesPerEpoch, MaxBatchesPerEpoch)
	case req.BatchesPerEpoch > 0 && len(req.Resume) > 0:
		return req, fmt.Errorf("%w: resume phases with batches_per_epoch: an epoch of fixed batches resumes at the same world size with start_batch", epoch.ErrRange)
	case req.BatchesPerEpoch > 0 && req.Epoch > (1<<62)/uint64(req.BatchesPerEpoch):
		return req, fmt.Errorf("%w: epoch %d with %d batches per epoch", epoch.ErrRange, req.Epoch, req.BatchesPerEpoch)
	}
	return req, nil
}

// addBatch adds batch bi of the rank's epoch to the plan with its memory
// bounds; bounds are its graphs' size bounds (cutPass).
func (l *Loader) addBatch(p *Plan, bi int, b []epoch.Item, bounds []aug.Size) error {
	budget := epoch.Budget{Graphs: p.Request.BatchSize, Nodes: l.cfg.NodeBudget, Edges: l.cfg.EdgeBudget}
	if len(b) == 1 && budget.Over(bounds[0].Nodes, bounds[0].Edges) {
		p.OverBudget = append(p.OverBudget, bi)
	}
	work, err := l.batchWork(p, b)
	if err != nil {
		return err
	}
	p.Batches = append(p.Batches, b)
	p.Index = append(p.Index, bi)
	// A twin batch's bounds sum its copies' sizes; each copy's row costs
	// what a graph's does.
	lay := l.src.Layout()
	rows := int64(max(p.Twins, 1)-1) * int64(len(b)) * batchBytes([]aug.Size{{}}, &lay, p.nodeWidth, p.edgeWidth)
	if l.st != nil {
		p.Bytes = append(p.Bytes, l.st.batchBytes(bounds)+work)
	} else {
		p.Bytes = append(p.Bytes, batchBytes(bounds, &lay, p.nodeWidth, p.edgeWidth)+rows+work)
	}
	p.Work = append(p.Work, work)
	edges := 0
	for _, s := range bounds {
		edges += 2 * s.Edges
	}
	p.Edges = append(p.Edges, edges)
	return nil
}

// batchWork is the working memory batch b holds: one worker augments a
// batch's graphs one after the other, so its largest graph's. A graph
// whose working memory exceeds the whole budget could never be built
// within it: the request is refused before anything is sent, naming it,
// and the daemon lives on.
func (l *Loader) batchWork(p *Plan, b []epoch.Item) (int64, error) {
	limit := l.cfg.Memory.WorkLimit()
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
				return 0, fmt.Errorf("%w: graph %d (%d nodes, %d edges) needs about %d MiB of working memory to augment with %s%s, more than the daemon's memory budget allows (%d MiB, --memory-budget): raise it, or serve a set without that graph",
					epoch.ErrRange, it.Graph, sz.Nodes, sz.Edges, (w+(1<<20)-1)>>20, op.Spec().Name, partner, limit>>20)
			}
			work = max(work, w)
		}
	}
	return work, nil
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
		partners := l.src.windowPartners(win)
		wpol, err := l.resolve(req, req.Epoch, partners)
		if err != nil {
			return nil, nil, nil, err
		}
		pp = &passPolicy{pass: pass, pol: wpol, partners: partners}
		pols = wpol
	} else {
		perm = epoch.Permutation(l.cfg.Seed, pass, l.src.served)
	}
	if l.cfg.Balanced {
		return l.cutBalanced(req, pass, perm, pp, pols, twinCum, bound)
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

// cutBalanced is cutPass under balanced budgets (Config.Balanced): the
// rank's batches of the pass's steps, each graph counted at the bound of
// the op it will get (or bound's).
func (l *Loader) cutBalanced(req wire.Request, pass uint64, perm []int64, pp *passPolicy, pols *policies, twinCum []float64, bound func(id int64) aug.Size) ([][]epoch.Item, [][]aug.Size, *passPolicy, error) {
	var buf [wire.MaxTwins]aug.Op
	sizeOf := func(id int64) aug.Size {
		if bound != nil {
			return bound(id)
		}
		var s aug.Size
		for _, op := range drawOps(pols.main, pols.twins, req.Twins, twinCum, l.cfg.Seed, epoch.Item{Graph: id, Pass: pass}, &buf) {
			b := l.src.Bound(op, id)
			s.Nodes += b.Nodes
			s.Edges += b.Edges
		}
		return s
	}
	budget := epoch.Budget{Graphs: req.BatchSize, Nodes: l.cfg.NodeBudget, Edges: l.cfg.EdgeBudget}
	batches, err := epoch.BalancedSlice(perm, resumePhases(req.Resume), req.Rank, req.World, budget,
		func(id int64) (int, int) { s := sizeOf(id); return s.Nodes, s.Edges }, l.cfg.Remainder)
	if err != nil {
		return nil, nil, nil, err
	}
	bounds := make([][]aug.Size, len(batches))
	for i, b := range batches {
		for k := range b {
			b[k].Pass = pass
			bounds[i] = append(bounds[i], sizeOf(b[k].Graph))
		}
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
