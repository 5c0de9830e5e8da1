package epoch

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/augloader/augloader/aug"
)

// ErrSchedule is the category of schedule syntax errors.
var ErrSchedule = errors.New("epoch: bad schedule")

// Schedule says which augmentation each graph of each epoch gets.
//
// Grammar (docs/schedule.md):
//
//	schedule := segment { (";" | newline) segment }
//	segment  := [ range "|" ] mixture
//	range    := INT ".." [ INT ]          epochs [a, b), b omitted: no end
//	mixture  := item { "," item }
//	item     := NAME { ":" ( KEY "=" VALUE | WEIGHT ) }
//
// NAME is an op of aug's op table (aug.Names); KEY=VALUE are its
// parameters (aug.Spec.Params); WEIGHT is a positive number. In
// a mixture either every item has a weight or none has (equal weights);
// weights are relative. A segment without a range covers every epoch. The
// first segment whose range holds the epoch applies. '#' starts a comment.
//
// Examples: "nodesam"; "submix:p=0.4"; "nodesam:0.5,none:0.5";
// "0..50|none; 50..|nodesam:0.7,submix:p=0.3:0.3".
type Schedule struct {
	Segments []Segment
	text     string
}

// Segment is the mixture of one epoch range.
type Segment struct {
	From, To int64 // epochs [From, To); To < 0 means no end
	Items    []Choice
}

// Choice is one policy of a mixture with its cumulative weight bound.
type Choice struct {
	Name   string
	Params map[string]string
	Weight float64 // normalised, the mixture's weights sum to 1
}

// Constant reports whether every epoch gets the same mixture: the first
// segment covers every epoch (later ones then never apply). A replay can
// then stitch materialized epochs into passes of a batches_per_epoch
// request, which uses the requested epoch's mixture for every pass.
func (s *Schedule) Constant() bool {
	return len(s.Segments) > 0 && s.Segments[0].From == 0 && s.Segments[0].To < 0
}

// String returns the schedule's source text.
func (s *Schedule) String() string { return s.text }

// Canonical is one spelling of the schedule for every text that gives the
// same draws: each segment with its range, each policy with its
// parameters (numbers in shortest form, keys sorted) and its normalised
// weight. "nodesam,none" and "0..|nodesam:2,none:2" are both
// "0..|nodesam:0.5,none:0.5". Part of a configuration's identity.
func (s *Schedule) Canonical() string {
	var b strings.Builder
	for i, g := range s.Segments {
		if i > 0 {
			b.WriteByte(';')
		}
		fmt.Fprintf(&b, "%d..", g.From)
		if g.To >= 0 {
			fmt.Fprintf(&b, "%d", g.To)
		}
		b.WriteByte('|')
		for j, it := range g.Items {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(it.Name)
			keys := make([]string, 0, len(it.Params))
			for k := range it.Params {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				v := it.Params[k]
				if f, err := strconv.ParseFloat(v, 64); err == nil {
					v = strconv.FormatFloat(f, 'g', -1, 64)
				}
				fmt.Fprintf(&b, ":%s=%s", k, v)
			}
			fmt.Fprintf(&b, ":%s", strconv.FormatFloat(it.Weight, 'g', -1, 64))
		}
	}
	return b.String()
}

// ParseSchedule parses the grammar above and checks every policy name and
// parameter (the ops are built by Resolve).
func ParseSchedule(text string) (*Schedule, error) {
	s := &Schedule{text: strings.TrimSpace(text)}
	sc := bufio.NewScanner(strings.NewReader(text))
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		for _, seg := range strings.Split(line, ";") {
			seg = strings.TrimSpace(seg)
			if seg == "" {
				continue
			}
			g, err := parseSegment(seg)
			if err != nil {
				return nil, fmt.Errorf("%w: line %d: %q: %v", ErrSchedule, lineNo, seg, err)
			}
			s.Segments = append(s.Segments, g)
		}
	}
	if len(s.Segments) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrSchedule)
	}
	return s, nil
}

// ReadSchedule parses a schedule file (at most 1 MiB).
func ReadSchedule(r io.Reader) (*Schedule, error) {
	b, err := io.ReadAll(io.LimitReader(r, 1<<20+1))
	if err != nil {
		return nil, err
	}
	if len(b) > 1<<20 {
		return nil, fmt.Errorf("%w: file larger than 1 MiB", ErrSchedule)
	}
	return ParseSchedule(string(b))
}

func parseSegment(seg string) (Segment, error) {
	g := Segment{From: 0, To: -1}
	if i := strings.IndexByte(seg, '|'); i >= 0 {
		rng := strings.TrimSpace(seg[:i])
		seg = seg[i+1:]
		a, b, ok := strings.Cut(rng, "..")
		if !ok {
			return g, fmt.Errorf("range %q: want FROM..TO, or FROM.. for no end", rng)
		}
		from, err := strconv.ParseInt(strings.TrimSpace(a), 10, 64)
		if err != nil || from < 0 {
			return g, fmt.Errorf("range %q: %q is not an epoch", rng, a)
		}
		g.From = from
		if b = strings.TrimSpace(b); b != "" {
			to, err := strconv.ParseInt(b, 10, 64)
			if err != nil || to <= from {
				return g, fmt.Errorf("range %q: end must be an epoch after %d", rng, from)
			}
			g.To = to
		}
	}
	weighted := -1
	var sum float64
	for _, raw := range strings.Split(seg, ",") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			return g, errors.New("empty policy in the mixture")
		}
		parts := strings.Split(raw, ":")
		it := Choice{Name: strings.ToLower(strings.TrimSpace(parts[0])), Params: map[string]string{}}
		hasW := false
		for _, p := range parts[1:] {
			p = strings.TrimSpace(p)
			if k, v, ok := strings.Cut(p, "="); ok {
				it.Params[strings.TrimSpace(k)] = strings.TrimSpace(v)
				continue
			}
			w, err := strconv.ParseFloat(p, 64)
			if err != nil || !(w > 0) || math.IsInf(w, 0) || hasW {
				return g, fmt.Errorf("%q: %q is neither KEY=VALUE nor one positive weight", raw, p)
			}
			it.Weight, hasW = w, true
		}
		if _, err := aug.New(it.Name, it.Params, nil); err != nil {
			return g, err
		}
		// Boolean parameters (self_loops) default to false: one spelling
		// of true, false dropped, so equal draws have one canonical form.
		// (p is in (0, 1), never a boolean spelling, even "0" or "1".)
		for k, v := range it.Params {
			if b, err := strconv.ParseBool(v); err == nil {
				if b {
					it.Params[k] = "true"
				} else {
					delete(it.Params, k)
				}
			}
		}
		switch {
		case weighted < 0:
			weighted = map[bool]int{false: 0, true: 1}[hasW]
		case (weighted == 1) != hasW:
			return g, errors.New("give every policy of a mixture a weight, or none")
		}
		if !hasW {
			it.Weight = 1
		}
		sum += it.Weight
		g.Items = append(g.Items, it)
	}
	for i := range g.Items {
		g.Items[i].Weight /= sum
	}
	return g, nil
}

// UsesIndex reports whether any op of the schedule reads a graph's
// aug.Index (aug.Spec.UsesIndex).
func (s *Schedule) UsesIndex() bool { return s.any(func(sp *aug.Spec) bool { return sp.UsesIndex }) }

// Augments reports whether any op of the schedule changes graphs (every op
// but none).
func (s *Schedule) Augments() bool { return s.any(func(sp *aug.Spec) bool { return sp.Augments }) }

// Mixes reports whether any op of the schedule draws a partner graph
// (SubMix).
func (s *Schedule) Mixes() bool { return s.any(func(sp *aug.Spec) bool { return sp.Mixes }) }

func (s *Schedule) any(f func(*aug.Spec) bool) bool {
	for _, g := range s.Segments {
		for _, it := range g.Items {
			if sp := aug.Lookup(it.Name); sp != nil && f(sp) {
				return true
			}
		}
	}
	return false
}

// Segment returns the segment for epoch e.
func (s *Schedule) Segment(e uint64) (*Segment, error) {
	for i := range s.Segments {
		g := &s.Segments[i]
		// In uint64: an epoch past 2^63-1 is in the open last segment, not
		// a negative one in no segment.
		if g.From >= 0 && e >= uint64(g.From) && (g.To < 0 || e < uint64(g.To)) {
			return g, nil
		}
	}
	return nil, fmt.Errorf("%w: the schedule has no policy for epoch %d", ErrRange, e)
}

// Ops builds every op of every segment (what any epoch may apply).
func (s *Schedule) Ops(partners aug.Partners) ([]aug.Op, error) {
	var ops []aug.Op
	for _, g := range s.Segments {
		for _, it := range g.Items {
			op, err := aug.New(it.Name, it.Params, partners)
			if err != nil {
				return nil, err
			}
			ops = append(ops, op)
		}
	}
	return ops, nil
}

// Policy is a segment's mixture resolved to ops.
type Policy struct {
	Ops []aug.Op
	cum []float64
}

// Resolve builds the ops of epoch e's segment; partners feeds SubMix.
func (s *Schedule) Resolve(e uint64, partners aug.Partners) (*Policy, error) {
	g, err := s.Segment(e)
	if err != nil {
		return nil, err
	}
	p := &Policy{}
	var acc float64
	for _, it := range g.Items {
		op, err := aug.New(it.Name, it.Params, partners)
		if err != nil {
			return nil, err
		}
		acc += it.Weight
		p.Ops = append(p.Ops, op)
		p.cum = append(p.cum, acc)
	}
	p.cum[len(p.cum)-1] = 1
	return p, nil
}

// NewPolicy builds a mixture from ops and positive relative weights (nil:
// equal), for programmatic use and tests.
func NewPolicy(ops []aug.Op, weights []float64) (*Policy, error) {
	if len(ops) == 0 || (weights != nil && len(weights) != len(ops)) {
		return nil, fmt.Errorf("epoch: %d ops with %d weights", len(ops), len(weights))
	}
	p := &Policy{Ops: ops}
	var sum float64
	for i := range ops {
		w := 1.0
		if weights != nil {
			w = weights[i]
		}
		if !(w > 0) {
			return nil, fmt.Errorf("epoch: weight %g is not positive", w)
		}
		sum += w
		p.cum = append(p.cum, sum)
	}
	for i := range p.cum {
		p.cum[i] /= sum
	}
	p.cum[len(p.cum)-1] = 1
	return p, nil
}

// Choose returns the op for graph id in epoch e: a draw keyed by (seed,
// epoch, graph id, aug.StreamPolicyChoice), so independent of rank and worker.
func (p *Policy) Choose(seed, e uint64, id int64) aug.Op {
	return p.ChooseStream(seed, e, id, aug.StreamPolicyChoice)
}

// ChooseStream is Choose drawing from stream id stream (a twin's:
// aug.StreamPolicyChoice+t·aug.TwinStride).
func (p *Policy) ChooseStream(seed, e uint64, id int64, stream uint64) aug.Op {
	if len(p.Ops) == 1 {
		return p.Ops[0]
	}
	return p.Ops[Pick(p.cum, seed, e, id, stream)]
}

// Pick draws an index from cumulative weights cum (ascending, the last 1;
// an entry equal to the one before it has weight 0 and is never drawn),
// keyed by (seed, epoch, graph id, stream).
func Pick(cum []float64, seed, e uint64, id int64, stream uint64) int {
	_, h := aug.Stream(seed, e, id, stream)
	u := float64(h>>11) / (1 << 53) // the stream key is itself a uniform hash; u < 1
	// The first bound above u: a zero weight's bound equals the one
	// before it, so it is skipped.
	i := sort.Search(len(cum), func(i int) bool { return cum[i] > u })
	return min(i, len(cum)-1)
}

// Cumulative turns non-negative relative weights (at least one positive)
// into Pick's cumulative bounds.
func Cumulative(weights []float64) ([]float64, error) {
	var sum float64
	for _, w := range weights {
		if !(w >= 0) || math.IsInf(w, 0) {
			return nil, fmt.Errorf("epoch: weight %g is not a finite non-negative number", w)
		}
		sum += w
	}
	if !(sum > 0) || math.IsInf(sum, 0) {
		return nil, fmt.Errorf("epoch: weights %v: want at least one positive, summing to a finite number", weights)
	}
	cum := make([]float64, len(weights))
	var acc float64
	for i, w := range weights {
		acc += w
		cum[i] = acc / sum
	}
	// The last positive weight's bound and every one after it is 1.
	for i := len(cum) - 1; i >= 0; i-- {
		cum[i] = 1
		if weights[i] > 0 {
			break
		}
	}
	return cum, nil
}

// ParseTwinSet reads one declared twin set, a schedule per twin separated
// by '/': "dropnode:p=0.2 / subgraph:ratio=0.2" (docs/schedule.md,
// "Twins"). It has 2 to maxTwins twins.
func ParseTwinSet(text string, maxTwins int) ([]*Schedule, error) {
	parts := strings.Split(text, "/")
	if len(parts) < 2 || len(parts) > maxTwins {
		return nil, fmt.Errorf("%w: twin set %q has %d schedules: want 2 to %d, separated by '/'", ErrSchedule, text, len(parts), maxTwins)
	}
	set := make([]*Schedule, len(parts))
	for i, part := range parts {
		s, err := ParseSchedule(part)
		if err != nil {
			return nil, fmt.Errorf("twin set %q, twin %d: %w", text, i, err)
		}
		set[i] = s
	}
	return set, nil
}
