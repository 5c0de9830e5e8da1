package atoms

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
)

// ErrStructure is the category of every structure a neighbour list (or a
// check) refuses: a position that is not finite, a singular cell on a
// periodic axis, a cutoff that is not positive, a cell so short for the
// cutoff that a shift leaves the stored range.
var ErrStructure = errors.New("atoms: invalid structure")

// binsPerCutoff: bins are at least cutoff/binsPerCutoff high, and a
// neighbour is searched binsPerCutoff bins away (more along a periodic
// axis shorter than the cutoff): 2 searches about half the volume 1 does.
const binsPerCutoff = 2

// MaxShift is the largest |S_k| a stored edge may have: shifts are stored
// as int8 (docs/format.md, "Structures"). A periodic axis needs more only
// when the cell is 127 times shorter than the cutoff along it.
const MaxShift = 127

// Convention says which pairs a neighbour list holds.
type Convention struct {
	// Name is "ase" (the default: ASE, matscipy, vesin and MACE agree) or
	// "fairchem".
	Name string
	// IncludeCutoff keeps pairs at exactly the cutoff (d ≤ cutoff; ase:
	// d < cutoff).
	IncludeCutoff bool
	// MinDistance drops pairs closer than it (fairchem: 1e-8; ase: none,
	// coincident atoms are kept and only i = j at S = 0 is dropped).
	MinDistance float64
	// MaxNeighbors, when positive, caps each atom's neighbours at the
	// nearest ones: fairchem's max_neighbors. Strict keeps exactly that
	// many (ties by (distance, j, S)); otherwise (fairchem's default) an
	// atom keeps every neighbour within Tolerance of the distance of its
	// (MaxNeighbors+1)-th nearest, as fairchem's get_max_neighbors_mask
	// does.
	MaxNeighbors int
	Strict       bool
	Tolerance    float64
}

// ConventionASE is ASE's, matscipy's, vesin's and MACE's: both
// directions, strictly d < cutoff, no i = j at S = 0, coincident atoms
// kept.
var ConventionASE = Convention{Name: "ase"}

// ConventionFairchem is fairchem's CPU graph (AtomicData.from_ase): d ≤
// cutoff, pairs closer than 1e-8 dropped; with maxNeighbors > 0 its cap
// and degeneracy tolerance (0.01 Å), strict when strict.
func ConventionFairchem(maxNeighbors int, strict bool) Convention {
	return Convention{Name: "fairchem", IncludeCutoff: true, MinDistance: 1e-8, MaxNeighbors: maxNeighbors, Strict: strict, Tolerance: 0.01}
}

// List is a neighbour list: edge e is (I[e], J[e]) with integer cell shift
// S[3e:3e+3], D = pos[J] − pos[I] + S·cell. The order is the builder's,
// the same for the same input: each (i, j, S) is followed by (j, i, −S);
// under a neighbour cap edges are grouped by I in increasing order.
type List struct {
	I, J []int32
	S    []int32
}

// Len is the number of (directed) edges.
func (l *List) Len() int { return len(l.I) }

// Reset empties the list, keeping its buffers.
func (l *List) Reset() { l.I, l.J, l.S = l.I[:0], l.J[:0], l.S[:0] }

// Builder computes neighbour lists with cell lists in time linear in the
// atoms and edges. Its buffers are reused across calls; not safe for
// concurrent use.
type Builder struct {
	wrapped []float64 // positions wrapped into the cell along periodic axes
	wrap    []int32   // wrap[3i+k]: cells atom i was moved by along axis k
	frac    []float64
	bin     []int32 // each atom's bin
	start   []int32 // bins' first entries in order (CSR)
	order   []int32 // atoms sorted by bin
	cursor  []int32
	sorted  []float64    // wrapped positions in bin order
	steps   [3][]binStep // per axis: (bin coordinate, step) → bin reached
	half    []halfPair   // pairs found once (i < j, or i = j at S > 0)
	at      []int32      // scatter: each atom's next slot
	dist    []float64    // out's squared distances, for a cap
	idx     []int32      // a cap: one atom's edges by distance
	keep    []int32
}

// binStep is a step along one axis from a bin: the bin coordinate reached
// (−1: past the end of a non-periodic axis) and the cells crossed.
type binStep struct {
	to    int32
	shift int32
}

// halfPair is one pair, found once: (i, j, S) and (j, i, −S) are edges.
type halfPair struct {
	i, j int32
	s    [3]int32
	d2   float64
}

// Build computes the neighbour list of the structure whose positions are
// pos (3 per atom, Å), cell rows a, b, c (Å; only the periodic ones
// matter) and pbc, under cutoff (Å), into out (reset first). A position
// that is not finite, a periodic cell vector that is not, a singular cell
// on the periodic axes and a cutoff that is not positive are ErrStructure
// naming what is wrong.
func (b *Builder) Build(pos []float64, cell *[9]float64, pbc [3]bool, cutoff float64, conv Convention, out *List) error {
	out.Reset()
	if len(pos)%3 != 0 {
		return fmt.Errorf("%w: %d position values, not 3 per atom", ErrStructure, len(pos))
	}
	if !(cutoff > 0) || math.IsInf(cutoff, 0) {
		return fmt.Errorf("%w: cutoff %v is not a positive number", ErrStructure, cutoff)
	}
	n := len(pos) / 3
	for i, v := range pos {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: atom %d: position %v is not finite", ErrStructure, i/3, v)
		}
	}
	basis, err := binningBasis(cell, pbc)
	if err != nil {
		return err
	}
	inv, ok := inverse3(&basis)
	if !ok {
		return fmt.Errorf("%w: the cell is singular on its periodic axes", ErrStructure)
	}
	if n == 0 {
		return nil
	}
	// Fractional coordinates in the binning basis; along a periodic axis
	// each atom is wrapped into [0, 1), remembering by how many cells.
	b.frac = grow(b.frac, 3*n)
	b.wrapped = grow(b.wrapped, 3*n)
	b.wrap = growI(b.wrap, 3*n)
	var lo, hi [3]float64
	for k := range 3 {
		lo[k], hi[k] = math.Inf(1), math.Inf(-1)
	}
	for i := range n {
		p := pos[3*i : 3*i+3]
		w := b.wrapped[3*i : 3*i+3]
		copy(w, p)
		for k := range 3 {
			f := p[0]*inv[0*3+k] + p[1]*inv[1*3+k] + p[2]*inv[2*3+k]
			s := int32(0)
			if pbc[k] {
				fl := math.Floor(f)
				if math.Abs(fl) > 1<<30 {
					return fmt.Errorf("%w: atom %d lies %.3g cells away along axis %d", ErrStructure, i, fl, k)
				}
				s = int32(fl)
				f -= fl
				if f >= 1 { // rounding: f was a hair below an integer
					f, s = 0, s+1
				}
				if s != 0 {
					for c := range 3 {
						w[c] -= float64(s) * basis[3*k+c]
					}
				}
			}
			b.frac[3*i+k], b.wrap[3*i+k] = f, s
			lo[k], hi[k] = min(lo[k], f), max(hi[k], f)
		}
	}
	// Bins: along each axis as many as fit whole cutoffs in the height
	// (the distance between the basis planes): a neighbour is then at most
	// m bins away, m = 1 unless a periodic cell is shorter than the
	// cutoff, when m whole cells are searched.
	var nb, m [3]int
	var span [3]float64
	for k := range 3 {
		h := 1 / math.Sqrt(inv[k]*inv[k]+inv[3+k]*inv[3+k]+inv[6+k]*inv[6+k]) // plane spacing of axis k
		if pbc[k] {
			span[k] = 1
			nb[k] = max(1, int(min(binsPerCutoff*h/cutoff, 1<<20)))
			need := math.Ceil(cutoff * float64(nb[k]) / h)
			if need > MaxShift {
				return fmt.Errorf("%w: the cell is %.4g Å high along axis %d, %.0f times shorter than the cutoff %g Å: shifts past ±%d", ErrStructure, h, k, cutoff/h, cutoff, MaxShift)
			}
			m[k] = int(need)
		} else {
			span[k] = hi[k] - lo[k]
			nb[k] = max(1, int(min(binsPerCutoff*span[k]*h/cutoff, 1<<20)))
			// Past the last bin there is nothing: at most nb bins away.
			m[k] = int(min(math.Ceil(cutoff*float64(nb[k])/max(span[k]*h, 1e-300)), float64(nb[k])))
		}
	}
	// No more bins than about twice the atoms: a large empty cell must not
	// cost a bin per cutoff cube. Fewer bins are taller, so m still reaches
	// every neighbour (a little further than needed).
	for nb[0]*nb[1]*nb[2] > 2*n+8 {
		k := 0
		for c := 1; c < 3; c++ {
			if nb[c] > nb[k] {
				k = c
			}
		}
		nb[k] = (nb[k] + 1) / 2
	}
	nbins := nb[0] * nb[1] * nb[2]
	b.bin = growI(b.bin, n)
	b.start = growI(b.start, nbins+1)
	clear(b.start)
	for i := range n {
		var c [3]int
		for k := range 3 {
			f := b.frac[3*i+k]
			if !pbc[k] {
				if span[k] > 0 {
					f = (f - lo[k]) / span[k]
				} else {
					f = 0
				}
			}
			c[k] = min(max(int(f*float64(nb[k])), 0), nb[k]-1)
		}
		bi := int32((c[2]*nb[1]+c[1])*nb[0] + c[0])
		b.bin[i] = bi
		b.start[bi+1]++
	}
	for i := 1; i <= nbins; i++ {
		b.start[i] += b.start[i-1]
	}
	b.order = growI(b.order, n)
	b.cursor = append(b.cursor[:0], b.start[:nbins]...)
	for i := range n {
		bi := b.bin[i]
		b.order[b.cursor[bi]] = int32(i)
		b.cursor[bi]++
	}

	// Positions in bin order, contiguous: the inner loop reads them in
	// sequence.
	b.sorted = grow(b.sorted, 3*n)
	for k, a := range b.order {
		copy(b.sorted[3*k:3*k+3], b.wrapped[3*a:3*a+3])
	}
	// Each axis's steps: from bin coordinate c by d ∈ [−m, m], the bin
	// reached and the cells crossed (a periodic axis wraps; another ends).
	var steps [3][]binStep
	for k := range 3 {
		w := 2*m[k] + 1
		steps[k] = b.steps[k][:0]
		for c := range nb[k] {
			for d := -m[k]; d <= m[k]; d++ {
				x, sh, ok := step(c, d, nb[k], pbc[k])
				if !ok {
					x = -1
				}
				steps[k] = append(steps[k], binStep{int32(x), sh})
			}
		}
		b.steps[k] = steps[k]
		_ = w
	}
	// Each pair is found once, from the half shell of bin offsets after
	// (0, 0, 0) (and within a bin from the lower index), and written both
	// ways. Bins are visited one at a time, each neighbour bin's offset
	// worked out once for all the bin's atoms.
	rc2 := cutoff * cutoff
	lo2 := conv.MinDistance * conv.MinDistance
	b.half = b.half[:0]
	// Without a cap each pair goes out at once, both ways; a cap needs
	// each atom's neighbours together (scatter).
	capped := conv.MaxNeighbors > 0
	hi2, low2 := rc2*(1+1e-9), rc2*(1-1e-9)
	for hb := range nbins {
		h0, h1 := int(b.start[hb]), int(b.start[hb+1])
		if h0 == h1 {
			continue
		}
		c := [3]int{hb % nb[0], hb / nb[0] % nb[1], hb / (nb[0] * nb[1])}
		for dz := 0; dz <= m[2]; dz++ {
			tz := steps[2][c[2]*(2*m[2]+1)+dz+m[2]]
			if tz.to < 0 {
				continue
			}
			sz := tz.shift
			dyLo := -m[1]
			if dz == 0 {
				dyLo = 0
			}
			for dy := dyLo; dy <= m[1]; dy++ {
				ty := steps[1][c[1]*(2*m[1]+1)+dy+m[1]]
				if ty.to < 0 {
					continue
				}
				sy := ty.shift
				dxLo := -m[0]
				if dz == 0 && dy == 0 {
					dxLo = 0
				}
				for dx := dxLo; dx <= m[0]; dx++ {
					tx := steps[0][c[0]*(2*m[0]+1)+dx+m[0]]
					if tx.to < 0 {
						continue
					}
					nbr := (int(tz.to)*nb[1]+int(ty.to))*nb[0] + int(tx.to)
					n0, n1 := int(b.start[nbr]), int(b.start[nbr+1])
					if n0 == n1 {
						continue
					}
					sx := tx.shift
					self := dz == 0 && dy == 0 && dx == 0
					// The image's offset: S'·basis (periodic rows only).
					fx, fy, fz := float64(sx), float64(sy), float64(sz)
					off0 := fx*basis[0] + fy*basis[3] + fz*basis[6]
					off1 := fx*basis[1] + fy*basis[4] + fz*basis[7]
					off2 := fx*basis[2] + fy*basis[5] + fz*basis[8]
					for a := h0; a < h1; a++ {
						ox, oy, oz := off0-b.sorted[3*a], off1-b.sorted[3*a+1], off2-b.sorted[3*a+2]
						j0 := n0
						if self {
							j0 = a + 1
						}
						for k := j0; k < n1; k++ {
							d0, d1, d2 := b.sorted[3*k]+ox, b.sorted[3*k+1]+oy, b.sorted[3*k+2]+oz
							r2 := d0*d0 + d1*d1 + d2*d2
							if r2 > hi2 {
								continue
							}
							i, j := int(b.order[a]), b.order[k]
							// S for the positions as given: S' − wrap[j] + wrap[i].
							sh := [3]int32{sx - b.wrap[3*j] + b.wrap[3*i], sy - b.wrap[3*j+1] + b.wrap[3*i+1], sz - b.wrap[3*j+2] + b.wrap[3*i+2]}
							if r2 >= low2 || r2 < lo2*(1+1e-9) {
								// Near the cutoff (or the minimum): decided by the
								// definition itself, D = pos[j] − pos[i] + S·cell.
								r2 = exactDistance2(pos, cell, i, int(j), sh)
							}
							if r2 > rc2 || (r2 == rc2 && !conv.IncludeCutoff) || r2 < lo2 {
								continue
							}
							if uint32(sh[0]+MaxShift) > 2*MaxShift || uint32(sh[1]+MaxShift) > 2*MaxShift || uint32(sh[2]+MaxShift) > 2*MaxShift {
								return fmt.Errorf("%w: atom %d and atom %d are neighbours %v cells apart: shifts past ±%d (wrap the positions into the cell)", ErrStructure, i, j, sh, MaxShift)
							}
							if capped {
								b.half = append(b.half, halfPair{i: int32(i), j: j, s: sh, d2: r2})
							} else {
								out.I = append(out.I, int32(i), j)
								out.J = append(out.J, j, int32(i))
								out.S = append(out.S, sh[0], sh[1], sh[2], -sh[0], -sh[1], -sh[2])
							}
						}
					}
				}
			}
		}
	}
	if capped {
		b.scatter(n, out)
		b.capNeighbors(conv, out)
	}
	return nil
}

// scatter writes the half pairs both ways into out, grouped by i in
// increasing order (a counting sort: linear): what a cap needs.
func (b *Builder) scatter(n int, out *List) {
	e := 2 * len(b.half)
	b.at = growI(b.at, n+1)
	clear(b.at)
	for _, p := range b.half {
		b.at[p.i+1]++
		b.at[p.j+1]++
	}
	for i := 1; i <= n; i++ {
		b.at[i] += b.at[i-1]
	}
	out.I, out.J, out.S = growI(out.I, e), growI(out.J, e), growI(out.S, 3*e)
	b.dist = grow(b.dist, e)
	for _, p := range b.half {
		k := b.at[p.i]
		b.at[p.i]++
		out.I[k], out.J[k], b.dist[k] = p.i, p.j, p.d2
		out.S[3*k], out.S[3*k+1], out.S[3*k+2] = p.s[0], p.s[1], p.s[2]
		k = b.at[p.j]
		b.at[p.j]++
		out.I[k], out.J[k], b.dist[k] = p.j, p.i, p.d2
		out.S[3*k], out.S[3*k+1], out.S[3*k+2] = -p.s[0], -p.s[1], -p.s[2]
	}
}

// capNeighbors keeps each atom's nearest conv.MaxNeighbors neighbours
// (ties by (distance, j, S)), or, not strict, every neighbour within
// conv.Tolerance of the distance of its (MaxNeighbors+1)-th nearest, as
// fairchem's get_max_neighbors_mask does; kept edges stay in their order.
func (b *Builder) capNeighbors(conv Convention, out *List) {
	w := 0
	for lo := 0; lo < out.Len(); {
		hi := lo
		for hi < out.Len() && out.I[hi] == out.I[lo] {
			hi++
		}
		keepAll := hi-lo <= conv.MaxNeighbors
		var limit float64
		if !keepAll {
			b.idx = b.idx[:0]
			for k := lo; k < hi; k++ {
				b.idx = append(b.idx, int32(k))
			}
			key := func(k int32) uint64 {
				return pairKey(out.J[k], [3]int32{out.S[3*k], out.S[3*k+1], out.S[3*k+2]})
			}
			slices.SortFunc(b.idx, func(x, y int32) int {
				if c := cmp.Compare(b.dist[x], b.dist[y]); c != 0 {
					return c
				}
				return cmp.Compare(key(x), key(y))
			})
			if conv.Strict {
				// Ties at the limit: the first by (j, S) are kept.
				b.keep = append(b.keep[:0], b.idx[:conv.MaxNeighbors]...)
				slices.Sort(b.keep)
				for _, k := range b.keep {
					b.copyEdge(out, w, int(k))
					w++
				}
				lo = hi
				continue
			}
			d := math.Sqrt(b.dist[b.idx[conv.MaxNeighbors]]) + conv.Tolerance
			limit = d * d
		}
		for k := lo; k < hi; k++ {
			if keepAll || math.Sqrt(b.dist[k]) <= math.Sqrt(limit) {
				b.copyEdge(out, w, k)
				w++
			}
		}
		lo = hi
	}
	out.I, out.J, out.S = out.I[:w], out.J[:w], out.S[:3*w]
}

func (b *Builder) copyEdge(out *List, to, from int) {
	out.I[to], out.J[to], b.dist[to] = out.I[from], out.J[from], b.dist[from]
	copy(out.S[3*to:3*to+3], out.S[3*from:3*from+3])
}

// pairKey orders a neighbour by (j, S): j above three biased shift bytes.
func pairKey(j int32, s [3]int32) uint64 {
	return uint64(j)<<24 | uint64(s[0]+128)<<16 | uint64(s[1]+128)<<8 | uint64(s[2]+128)
}

// exactDistance2 is |pos[j] − pos[i] + S·cell|².
func exactDistance2(pos []float64, cell *[9]float64, i, j int, s [3]int32) float64 {
	var r2 float64
	for c := range 3 {
		d := pos[3*j+c] - pos[3*i+c] + float64(s[0])*cell[c] + float64(s[1])*cell[3+c] + float64(s[2])*cell[6+c]
		r2 += d * d
	}
	return r2
}

// step moves bin coordinate c by d among n bins: along a periodic axis it
// wraps, returning the image shift; along another it stays in range.
func step(c, d, n int, periodic bool) (int, int32, bool) {
	x := c + d
	if !periodic {
		return x, 0, x >= 0 && x < n
	}
	s := floorDiv(x, n)
	return x - s*n, int32(s), true
}

func floorDiv(a, b int) int {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// binningBasis is the basis the atoms are binned in: the cell's rows along
// periodic axes (checked finite and independent), and along the others
// unit vectors completing them (the cell there is not used: no shift
// crosses a non-periodic axis).
func binningBasis(cell *[9]float64, pbc [3]bool) ([9]float64, error) {
	var b [9]float64
	var per []int
	for k := range 3 {
		if !pbc[k] {
			continue
		}
		row := cell[3*k : 3*k+3]
		for _, v := range row {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return b, fmt.Errorf("%w: cell vector %d (periodic) holds %v", ErrStructure, k, v)
			}
		}
		copy(b[3*k:3*k+3], row)
		per = append(per, k)
	}
	switch len(per) {
	case 0:
		b = [9]float64{1, 0, 0, 0, 1, 0, 0, 0, 1}
	case 1:
		p := per[0]
		a := vec(b[3*p:])
		if norm(a) < 1e-9 {
			return b, fmt.Errorf("%w: cell vector %d is periodic but has length %g", ErrStructure, p, norm(a))
		}
		// Two unit vectors perpendicular to a and to each other.
		e := [3]float64{1, 0, 0}
		if math.Abs(a[0]) > math.Abs(a[1]) && math.Abs(a[0]) > math.Abs(a[2]) {
			e = [3]float64{0, 1, 0}
		}
		u := unit(cross(a, e))
		v := unit(cross(a, u))
		others := []int{0, 1, 2}
		others = slices.DeleteFunc(others, func(k int) bool { return k == p })
		copy(b[3*others[0]:], u[:])
		copy(b[3*others[1]:], v[:])
	case 2:
		p, q := per[0], per[1]
		a, c := vec(b[3*p:]), vec(b[3*q:])
		x := cross(a, c)
		if norm(x) <= 1e-9*max(norm(a)*norm(c), 1e-300) || norm(a) < 1e-9 || norm(c) < 1e-9 {
			return b, fmt.Errorf("%w: cell vectors %d and %d are periodic but parallel or zero (singular cell)", ErrStructure, p, q)
		}
		r := 3 - p - q
		u := unit(x)
		copy(b[3*r:], u[:])
	case 3:
		a, c, d := vec(b[0:]), vec(b[3:]), vec(b[6:])
		det := dot(a, cross(c, d))
		if math.Abs(det) <= 1e-9*norm(a)*norm(c)*norm(d) || norm(a) < 1e-9 || norm(c) < 1e-9 || norm(d) < 1e-9 {
			return b, fmt.Errorf("%w: the cell is periodic on every axis but singular (volume %g Å³)", ErrStructure, det)
		}
	}
	return b, nil
}

// inverse3 inverts the row-major 3×3 matrix m.
func inverse3(m *[9]float64) ([9]float64, bool) {
	a, b, c := m[0], m[1], m[2]
	d, e, f := m[3], m[4], m[5]
	g, h, i := m[6], m[7], m[8]
	A, B, C := e*i-f*h, -(d*i - f*g), d*h-e*g
	det := a*A + b*B + c*C
	if det == 0 || math.IsNaN(det) {
		return [9]float64{}, false
	}
	r := 1 / det
	return [9]float64{
		A * r, -(b*i - c*h) * r, (b*f - c*e) * r,
		B * r, (a*i - c*g) * r, -(a*f - c*d) * r,
		C * r, -(a*h - b*g) * r, (a*e - b*d) * r,
	}, true
}

func vec(s []float64) [3]float64  { return [3]float64{s[0], s[1], s[2]} }
func dot(a, b [3]float64) float64 { return a[0]*b[0] + a[1]*b[1] + a[2]*b[2] }
func norm(a [3]float64) float64   { return math.Sqrt(dot(a, a)) }
func cross(a, b [3]float64) [3]float64 {
	return [3]float64{a[1]*b[2] - a[2]*b[1], a[2]*b[0] - a[0]*b[2], a[0]*b[1] - a[1]*b[0]}
}
func unit(a [3]float64) [3]float64 {
	n := norm(a)
	return [3]float64{a[0] / n, a[1] / n, a[2] / n}
}

func grow(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n)
	}
	return s[:n]
}

func growI(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n)
	}
	return s[:n]
}
