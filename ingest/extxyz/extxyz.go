// Package extxyz reads extended XYZ files, the format ase.io.write writes,
// as ASE's ase.io.read reads them (ase/io/extxyz.py): per frame a line with
// the atom count, a comment line of key=value pairs (Lattice, pbc,
// Properties, and any other: energy, stress, ...), then one line per atom
// whose columns Properties names (species or Z, pos, forces, ...).
//
// Contract:
//   - Open reads the file once (gzip-compressed or not) to learn what its
//     structures carry: every numeric or logical key of the comment lines
//     becomes a per-structure property, every numeric or logical column
//     of Properties a per-atom one, under ASE's names (a "charge" column
//     is "charges", move_mask is "fixed": 1 where ASE's FixAtoms or
//     FixCartesian holds the atom), the label keys renamed to their
//     canonical names (ingest.LabelKeys). Text values are not stored
//     (Skipped names them).
//   - Structures reads it again and hands over every frame in order, each
//     value exactly as ASE's reader gives it: Lattice's rows are the cell,
//     pbc defaults to periodic on every axis when a Lattice is given and to
//     none otherwise, stress and virial are 3×3 (the file's column-major 9
//     values), positions float64.
//   - Every fault is an *ingest.FormatError naming the file, the line and
//     the field: a count that is not a positive integer, a missing or
//     short atom line, a value that does not parse, an unknown element, a
//     position that is not finite, a key whose size or kind changes
//     between structures, a blank line with structures after it (ASE stops
//     there and drops the rest). Nothing panics on any input.
package extxyz

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"

	"github.com/klauspost/compress/gzip"

	"github.com/augloader/augloader/ingest"
	"github.com/augloader/augloader/internal/iox"
	"github.com/augloader/augloader/internal/ordered"
	"github.com/augloader/augloader/shard"
)

// Format is this reader's name, its errors' prefix.
const Format = "extxyz"

// maxLine caps one line (a comment line holding a large JSON value).
const maxLine = 64 << 20

// Recognise reports whether the file's first bytes look like an extended
// XYZ file: an atom count alone on the first line (or gzip's magic, for
// a compressed one, whose name then says .xyz or .extxyz).
func Recognise(name string, head []byte) bool {
	if bytes.HasPrefix(head, []byte{0x1f, 0x8b}) {
		base := filepath.Base(name)
		return hasAnySuffix(base, ".xyz.gz", ".extxyz.gz")
	}
	line, _, _ := bytes.Cut(head, []byte("\n"))
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return false
	}
	_, err := strconv.ParseInt(string(line), 10, 64)
	return err == nil
}

func hasAnySuffix(s string, suffixes ...string) bool {
	for _, x := range suffixes {
		if len(s) > len(x) && s[len(s)-len(x):] == x {
			return true
		}
	}
	return false
}

// Set is an opened extended XYZ file, or a folder of them.
type Set struct {
	files   []string // read in this order
	shown   string   // the file being read, as errors name it
	keys    ingest.LabelKeys
	props   []shard.Property
	n       int64
	skipped []string
	sources []ingest.SourceHash
}

// Files lists what Open reads at path: the file itself, or a folder's
// extended XYZ files (*.xyz, *.extxyz, either gzip-compressed), in name
// order.
func Files(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, ingest.Errorf(Format, filepath.Base(path), 0, 0, "%v", err)
	}
	if !st.IsDir() {
		return []string{path}, nil
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return nil, ingest.Errorf(Format, filepath.Base(path), 0, 0, "%v", err)
	}
	var out []string
	for _, e := range ents {
		if e.Type().IsRegular() && hasAnySuffix(e.Name(), ".xyz", ".extxyz", ".xyz.gz", ".extxyz.gz") {
			out = append(out, filepath.Join(path, e.Name()))
		}
	}
	if len(out) == 0 {
		return nil, ingest.Errorf(Format, filepath.Base(path), 0, 0, "no .xyz or .extxyz files in the folder")
	}
	return out, nil // ReadDir sorts by name
}

// Open reads the file at path (or the folder's files, Files) once to learn
// its structures' count and properties.
func Open(ctx context.Context, path string, keys ingest.LabelKeys) (*Set, error) {
	files, err := Files(path)
	if err != nil {
		return nil, err
	}
	s := &Set{files: files, shown: filepath.Base(files[0]), keys: keys}
	sc := &scan{set: s, index: map[string]int{}, skipped: map[string]bool{}}
	err = s.read(ctx, true, func(fr *frame) error { return sc.frame(fr) })
	if err != nil {
		return nil, err
	}
	if s.n == 0 {
		return nil, ingest.Errorf(Format, s.shown, 0, 0, "no structures")
	}
	s.props = sc.ordered()
	for k := range sc.skipped {
		s.skipped = append(s.skipped, k)
	}
	slices.Sort(s.skipped)
	return s, nil
}

// Format implements ingest.StructureSet.
func (s *Set) Format() string { return Format }

// Properties implements ingest.StructureSet.
func (s *Set) Properties() []shard.Property { return slices.Clone(s.props) }

// Len implements ingest.StructureSet.
func (s *Set) Len() int64 { return s.n }

// Skipped implements ingest.StructureSet.
func (s *Set) Skipped() []string { return s.skipped }

// Sources implements ingest.StructureSet.
func (s *Set) Sources() []ingest.SourceHash { return slices.Clone(s.sources) }

// Close implements ingest.StructureSet.
func (s *Set) Close() error { return nil }

// Structures implements ingest.StructureSet: the files read again, every
// frame parsed on as many goroutines as there are cores (this goroutine
// reads, fn is called in order on the caller's). The files must not have
// changed since Open (their SHA-256 is compared at the end).
func (s *Set) Structures(ctx context.Context, fn func(*ingest.Structure) error) error {
	index := make(map[string]int, len(s.props))
	for k, p := range s.props {
		index[p.Name] = k
	}
	first := slices.Clone(s.sources)
	type job struct {
		fr  frame
		st  ingest.Structure
		err error
	}
	err := ordered.Run(ctx, runtime.GOMAXPROCS(0), func(p *ordered.Producer[job]) error {
		return s.read(p.Context(), false, func(fr *frame) error {
			j := p.Next()
			j.fr.copyFrom(fr)
			if j.st.Props == nil {
				j.st.Props = make([][]float64, len(s.props))
			}
			return p.Send()
		})
	}, func() func(*job) {
		return func(j *job) { j.err = s.fill(&j.fr, index, &j.st) }
	}, func(j *job) error {
		if j.err != nil {
			return j.err
		}
		return fn(&j.st)
	})
	if err != nil {
		return err
	}
	for i, src := range s.sources {
		if src != first[i] {
			return ingest.Errorf(Format, src.Name, 0, 0, "the file changed while it was read (SHA-256 %s, then %s)", first[i].SHA256[:12], src.SHA256[:12])
		}
	}
	return nil
}

// copyFrom makes fr a copy of src that src's next frame does not touch
// (the values parsed from its comment line are its own already).
func (fr *frame) copyFrom(src *frame) {
	info, vals, cols, text, ends := fr.info, fr.infoVals, fr.cols, fr.text, fr.ends
	*fr = *src
	fr.info = append(info[:0], src.info...)
	fr.infoVals = append(vals[:0], src.infoVals...)
	fr.cols = append(cols[:0], src.cols...)
	fr.text = append(text[:0], src.text...)
	fr.ends = append(ends[:0], src.ends...)
}

// frame is one frame as read: its count, comment line and atom lines.
type frame struct {
	index    int64
	file     string // its file, as errors name it
	line     int64  // the count line
	natoms   int
	info     []kv
	infoVals []value
	lattice  []float64 // nil: none
	pbc      [3]bool
	cols     []column
	width    int    // fields Properties declares an atom line to hold
	text     []byte // the atom lines, when kept, one after the other
	ends     []int  // where each ends in text
	atomAt   int64  // line of the first atom
}

// read reads the files, calling fn for every frame; scanOnly leaves the
// atom lines unparsed (counted and checked for their field count only).
func (s *Set) read(ctx context.Context, scanOnly bool, fn func(*frame) error) error {
	s.sources = s.sources[:0]
	var n int64
	var fr frame
	for _, path := range s.files {
		if err := s.readFile(ctx, path, scanOnly, &n, &fr, fn); err != nil {
			return err
		}
	}
	s.n = n
	return nil
}

// readFile reads one file's frames, numbered from *n on.
func (s *Set) readFile(ctx context.Context, path string, scanOnly bool, n *int64, fr *frame, fn func(*frame) error) error {
	s.shown = filepath.Base(path)
	f, err := iox.OpenRegular(path)
	if err != nil {
		return ingest.Errorf(Format, s.shown, 0, 0, "%v", err)
	}
	defer f.Close()
	// The file's bytes as on disk, counted and hashed as they are read.
	cnt := &iox.CountingWriter{W: io.Discard, Hash: sha256.New()}
	raw := io.TeeReader(f, cnt)
	br := bufio.NewReaderSize(raw, 1<<20)
	var r io.Reader = br
	if head, _ := br.Peek(2); bytes.Equal(head, []byte{0x1f, 0x8b}) {
		z, err := gzip.NewReader(br)
		if err != nil {
			return ingest.Errorf(Format, s.shown, 0, 0, "gzip: %v", err)
		}
		defer z.Close()
		r = z
	}
	lr := &lines{br: bufio.NewReaderSize(r, 1<<20), shown: s.shown}
	if r == br {
		lr.br = br
	}
	for {
		if *n&63 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		ok, err := s.frame(lr, *n, fr, !scanOnly)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		if err := fn(fr); err != nil {
			return err
		}
		*n++
	}
	// The source's bytes: all of them read (a gzip stream to its trailer).
	if _, err := io.Copy(io.Discard, r); err != nil {
		return ingest.Errorf(Format, s.shown, lr.line, 0, "read: %v", err)
	}
	if _, err := io.Copy(io.Discard, raw); err != nil {
		return ingest.Errorf(Format, s.shown, 0, 0, "read: %v", err)
	}
	s.sources = append(s.sources, ingest.SourceHash{Name: s.shown, Bytes: cnt.N, SHA256: hex.EncodeToString(cnt.Hash.Sum(nil))})
	return nil
}

// lines reads a file's lines, counting them.
type lines struct {
	br    *bufio.Reader
	shown string
	line  int64
	held  []byte // a line read ahead (VEC lookahead)
	hold  bool
}

// next returns the next line without its end, or io.EOF; valid until the
// next call.
func (l *lines) next() ([]byte, error) {
	if l.hold {
		l.hold = false
		l.line++
		return l.held, nil
	}
	b, err := l.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		// A long line (a comment line with a large value): gather it.
		buf := append([]byte(nil), b...)
		for errors.Is(err, bufio.ErrBufferFull) {
			if len(buf) > maxLine {
				return nil, ingest.Errorf(Format, l.shown, l.line+1, 0, "line longer than %d bytes", maxLine)
			}
			b, err = l.br.ReadSlice('\n')
			buf = append(buf, b...)
		}
		b = buf
	}
	if err != nil && err != io.EOF {
		return nil, ingest.Errorf(Format, l.shown, l.line+1, 0, "read: %v", err)
	}
	if len(b) == 0 && err == io.EOF {
		return nil, io.EOF
	}
	l.line++
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b, nil
}

// unread gives the last line back (b, which next returned).
func (l *lines) unread(b []byte) {
	l.held = append(l.held[:0], b...)
	l.hold = true
	l.line--
}

func blank(b []byte) bool { return len(bytes.TrimSpace(b)) == 0 }

// frame reads frame n into fr (its atom lines too when keep); false at
// the end of the file.
func (s *Set) frame(l *lines, n int64, fr *frame, keep bool) (bool, error) {
	head, err := l.next()
	if err == io.EOF {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if blank(head) {
		// ASE stops at a blank line; anything after it would be lost.
		at := l.line
		for {
			b, err := l.next()
			if err == io.EOF {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			if !blank(b) {
				return false, ingest.Errorf(Format, s.shown, at, 0, "blank line before more structures (line %d): ase.io.read stops here and drops the rest; remove it", l.line)
			}
		}
	}
	*fr = frame{index: n, file: s.shown, line: l.line, info: fr.info[:0], infoVals: fr.infoVals[:0], cols: fr.cols[:0], text: fr.text[:0], ends: fr.ends[:0]}
	count, err := strconv.ParseInt(string(bytes.TrimSpace(head)), 10, 64)
	switch {
	case err != nil:
		return false, ingest.Errorf(Format, s.shown, l.line, 1, "%q is not an atom count (structure %d)", trim(head), n)
	case count < 1:
		return false, ingest.Errorf(Format, s.shown, l.line, 1, "structure %d has %d atoms", n, count)
	case count > shard.MaxNodesPerGraph:
		return false, ingest.Errorf(Format, s.shown, l.line, 1, "structure %d: %d atoms is more than a structure may hold", n, count)
	}
	fr.natoms = int(count)
	comment, err := l.next()
	if err == io.EOF {
		return false, ingest.Errorf(Format, s.shown, l.line+1, 0, "structure %d: the file ends before its comment line", n)
	}
	if err != nil {
		return false, err
	}
	if err := s.parseComment(string(comment), l.line, fr); err != nil {
		return false, err
	}
	fr.atomAt = l.line + 1
	width := 0
	for _, c := range fr.cols {
		width += c.cols
	}
	fr.width = width
	for a := 0; a < fr.natoms; a++ {
		b, err := l.next()
		if err == io.EOF {
			return false, ingest.Errorf(Format, s.shown, l.line+1, 0, "structure %d: the file ends after %d of its %d atoms", n, a, fr.natoms)
		}
		if err != nil {
			return false, err
		}
		// The fields are counted where the line is parsed (fill): a scan
		// only learns the frames' keys.
		if keep {
			fr.text = append(fr.text, b...)
			fr.ends = append(fr.ends, len(fr.text))
		}
	}
	// VEC1..3 lines after the atoms give the cell (ASE's adfxyz variant).
	for v := 1; ; v++ {
		b, err := l.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return false, err
		}
		t := bytes.TrimLeft(b, " \t")
		if !bytes.HasPrefix(t, []byte("VEC")) {
			l.unread(b)
			break
		}
		f := bytes.Fields(t)
		if v > 3 || len(f) != 4 || string(f[0]) != "VEC"+strconv.Itoa(v) {
			return false, ingest.Errorf(Format, s.shown, l.line, 1, "structure %d: %q, want VEC%d x y z (at most three)", n, trim(b), v)
		}
		if fr.lattice == nil {
			fr.lattice = make([]float64, 9)
			fr.pbc = [3]bool{}
		}
		for k := range 3 {
			x, err := strconv.ParseFloat(string(f[k+1]), 64)
			if err != nil {
				return false, ingest.Errorf(Format, s.shown, l.line, k+2, "structure %d: %q is not a number", n, f[k+1])
			}
			fr.lattice[3*(v-1)+k] = x
		}
		fr.pbc[v-1] = true
	}
	return true, nil
}

func trim(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}

// parseComment reads a frame's comment line: the cell, pbc, Properties
// and the other keys' values.
func (s *Set) parseComment(line string, at int64, fr *frame) error {
	fail := func(field int, format string, args ...any) error {
		return ingest.Errorf(Format, s.shown, at, field, "structure %d: %s", fr.index, fmt.Sprintf(format, args...))
	}
	props := "species:S:1:pos:R:3"
	var pbcSet bool
	for i, p := range splitInfo(line) {
		switch {
		case p.key == "":
			return fail(i+1, "a value without a key (%q)", p.value)
		case p.key == "Properties":
			props = p.value
			continue
		}
		v := parseValue(p.key, p.value)
		switch p.key {
		case "Lattice":
			if v.kind != kindNumber || len(v.nums) != 9 {
				return fail(i+1, "Lattice: %q is not 9 numbers", p.value)
			}
			// The file lists a, b, c in turn: the cell's rows.
			fr.lattice = v.nums
			continue
		case "pbc":
			if v.kind != kindBool || len(v.nums) != 3 {
				return fail(i+1, "pbc: %q is not 3 logicals (T or F)", p.value)
			}
			for k := range 3 {
				fr.pbc[k] = v.nums[k] != 0
			}
			pbcSet = true
			continue
		case "stress", "virial":
			if v.kind != kindNumber || len(v.nums) != 9 {
				return fail(i+1, "%s: %q is not 9 numbers (a 3×3 matrix)", p.key, p.value)
			}
			// Column-major in the file (ASE's reshape order='F'): stored
			// row-major.
			m := make([]float64, 9)
			for r := range 3 {
				for c := range 3 {
					m[3*r+c] = v.nums[r+3*c]
				}
			}
			v.nums = m
		}
		fr.info = append(fr.info, p)
		fr.infoVals = append(fr.infoVals, v)
	}
	if !pbcSet {
		fr.pbc = [3]bool{fr.lattice != nil, fr.lattice != nil, fr.lattice != nil}
	}
	cols, err := parseProperties(props)
	if err != nil {
		return fail(0, "Properties: %v", err)
	}
	fr.cols = cols
	return nil
}
