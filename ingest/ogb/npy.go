package ogb

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/augloader/augloader/ingest"
)

// npyHeader is what an .npy file's header says (NumPy's format, versions
// 1 to 3): the element type, and the shape in C order.
type npyHeader struct {
	kind    byte // 'i' signed, 'u' unsigned, 'b' bool, 'f' float
	size    int  // bytes an element
	shape   []int64
	fortran bool  // column-major (what a transposed array saves as)
	hdrLen  int64 // bytes before the first element: magic, version, header
}

// maxNpyHeader bounds the header NumPy writes (a dict literal padded to
// 64 bytes); a longer one is not an array of numbers.
const maxNpyHeader = 1 << 16

// readNpyHeader reads the magic, the version and the header dict of an
// .npy stream, leaving r at the first element.
func readNpyHeader(r io.Reader, shown string) (npyHeader, error) {
	var h npyHeader
	var pre [10]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return h, formatErr(shown, 0, 0, "not an .npy array: %v", err)
	}
	if string(pre[:6]) != "\x93NUMPY" {
		return h, formatErr(shown, 0, 0, "not an .npy array (no \\x93NUMPY magic)")
	}
	var n int
	switch pre[6] {
	case 1:
		n = int(binary.LittleEndian.Uint16(pre[8:10]))
	case 2, 3:
		var more [2]byte
		if _, err := io.ReadFull(r, more[:]); err != nil {
			return h, formatErr(shown, 0, 0, "truncated .npy header: %v", err)
		}
		n = int(binary.LittleEndian.Uint32(append(pre[8:10:10], more[:]...)))
	default:
		return h, formatErr(shown, 0, 0, ".npy format version %d.%d is not known (1 to 3 are)", pre[6], pre[7])
	}
	if n > maxNpyHeader {
		return h, formatErr(shown, 0, 0, ".npy header of %d bytes (at most %d)", n, maxNpyHeader)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return h, formatErr(shown, 0, 0, "truncated .npy header: %v", err)
	}
	h, err := parseNpyHeader(string(buf), shown)
	h.hdrLen = 10 + int64(n)
	if pre[6] != 1 {
		h.hdrLen += 2
	}
	return h, err
}

// parseNpyHeader parses the dict literal NumPy writes:
// {'descr': '<i8', 'fortran_order': False, 'shape': (2, 20), }.
func parseNpyHeader(s, shown string) (npyHeader, error) {
	var h npyHeader
	bad := func(detail string, args ...any) (npyHeader, error) {
		return npyHeader{}, formatErr(shown, 0, 0, ".npy header: "+detail, args...)
	}
	descr, ok := dictValue(s, "descr")
	if !ok {
		return bad("no 'descr' in %q", s)
	}
	descr = strings.Trim(descr, "'\"")
	if len(descr) < 3 {
		return bad("element type %q is not a plain number type", descr)
	}
	order, kind := descr[0], descr[1]
	size, err := strconv.Atoi(descr[2:])
	if err != nil {
		return bad("element type %q is not a plain number type (structured and object arrays are not read)", descr)
	}
	switch {
	case order == '>' && size > 1:
		return bad("element type %q is big-endian; save it little-endian (NumPy's default)", descr)
	case order != '<' && order != '|' && order != '=' && order != '>':
		return bad("element type %q: unknown byte order", descr)
	}
	switch {
	case (kind == 'i' || kind == 'u') && (size == 1 || size == 2 || size == 4 || size == 8),
		kind == 'b' && size == 1, kind == 'f' && (size == 2 || size == 4 || size == 8):
	default:
		return bad("element type %q is not read (integers, bools and floats are)", descr)
	}
	h.kind, h.size = kind, size
	fo, ok := dictValue(s, "fortran_order")
	if !ok {
		return bad("no 'fortran_order' in %q", s)
	}
	shape, ok := dictValue(s, "shape")
	if !ok || !strings.HasPrefix(shape, "(") || !strings.HasSuffix(shape, ")") {
		return bad("no 'shape' tuple in %q", s)
	}
	for _, f := range strings.Split(strings.Trim(shape, "()"), ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		d, err := strconv.ParseInt(strings.TrimSuffix(f, "L"), 10, 64)
		if err != nil || d < 0 || d > math.MaxInt32*int64(16) {
			return bad("shape %s: %q is not a dimension", shape, f)
		}
		h.shape = append(h.shape, d)
	}
	if len(h.shape) > 2 {
		return bad("shape %s: at most two dimensions are read", shape)
	}
	h.fortran = fo == "True"
	return h, nil
}

// dictValue is the text of key's value in a flat Python dict literal: a
// quoted string, a tuple, or a bare word.
func dictValue(s, key string) (string, bool) {
	i := strings.Index(s, "'"+key+"'")
	if i < 0 {
		i = strings.Index(s, "\""+key+"\"")
	}
	if i < 0 {
		return "", false
	}
	rest := strings.TrimLeft(s[i+len(key)+2:], " ")
	rest, ok := strings.CutPrefix(rest, ":")
	if !ok {
		return "", false
	}
	rest = strings.TrimLeft(rest, " ")
	if rest == "" {
		return "", false
	}
	end := 0
	switch rest[0] {
	case '(':
		end = strings.IndexByte(rest, ')') + 1
	case '\'', '"':
		end = strings.IndexByte(rest[1:], rest[0]) + 2
	default:
		end = strings.IndexAny(rest, ",}")
	}
	if end <= 0 {
		return "", false
	}
	return strings.TrimSpace(rest[:end]), true
}

// rows is the number of rows of an array, cols the fields a row (1 for a
// vector).
func (h npyHeader) rows() int64 {
	if len(h.shape) == 0 {
		return 1
	}
	return h.shape[0]
}

func (h npyHeader) cols() int {
	if len(h.shape) < 2 {
		return 1
	}
	return int(h.shape[1])
}

// npyElems reads an array's elements one by one as float64, saying
// whether the element type is an integer (or bool) type.
type npyElems struct {
	h    npyHeader
	br   *bufio.Reader
	buf  [8]byte
	name string
	// checked: the bytes were checked before (an inflated copy); the
	// stream's end needs no check of its own.
	checked bool
}

// end checks that the stream is at its entry's end: a read there returns
// io.EOF, which the zip reader returns only once the entry's CRC-32 and
// size are checked.
func (e *npyElems) end() error {
	if e.checked {
		return nil
	}
	_, err := e.br.ReadByte()
	switch {
	case err == io.EOF:
		return nil
	case err == nil:
		return formatErr(e.name, 0, 0, "bytes past the array's shape %s", e.h)
	}
	return formatErr(e.name, 0, 0, "%v", err)
}

func (e *npyElems) next() (float64, error) {
	b := e.buf[:e.h.size]
	if _, err := io.ReadFull(e.br, b); err != nil {
		return 0, formatErr(e.name, 0, 0, "the array ends before its shape says: %v", err)
	}
	switch e.h.kind {
	case 'b', 'u':
		switch e.h.size {
		case 1:
			return float64(b[0]), nil
		case 2:
			return float64(binary.LittleEndian.Uint16(b)), nil
		case 4:
			return float64(binary.LittleEndian.Uint32(b)), nil
		}
		v := binary.LittleEndian.Uint64(b)
		if err := ingest.ExactUint(v); err != nil {
			return 0, formatErr(e.name, 0, 0, "%v", err)
		}
		return float64(v), nil
	case 'i':
		switch e.h.size {
		case 1:
			return float64(int8(b[0])), nil
		case 2:
			return float64(int16(binary.LittleEndian.Uint16(b))), nil
		case 4:
			return float64(int32(binary.LittleEndian.Uint32(b))), nil
		}
		v := int64(binary.LittleEndian.Uint64(b))
		if err := ingest.ExactInt(v); err != nil {
			return 0, formatErr(e.name, 0, 0, "%v", err)
		}
		return float64(v), nil
	}
	switch e.h.size {
	case 2:
		return float64(half(binary.LittleEndian.Uint16(b))), nil
	case 4:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b))), nil
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(b)), nil
}

// half widens an IEEE 754 half-precision float.
func half(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | frac<<13)
	case exp == 0 && frac == 0:
		return math.Float32frombits(sign)
	case exp == 0:
		return float32(math.Ldexp(float64(frac), -24)) * float32(1-2*int(h>>15))
	}
	return math.Float32frombits(sign | (exp+112)<<23 | frac<<13)
}

// npySource yields an array's rows as a rowSource: row i is line i+1 in
// errors, its fields the columns. The elements come from one stream per
// run of a row's fields that are adjacent in the file: a C-order array
// is one stream of whole rows; a Fortran-order one (column-major), one
// stream per column, each started that column's offset in; OGB's
// edge_index (2 × E) read as E rows "u, v" is two streams in C order
// and one in Fortran order (what smiles2graph's transpose saves).
type npySource struct {
	h       npyHeader
	streams []*npyElems
	per     int // fields a stream gives a row
	rows    int64
	row     int64
	name    string
	closers []io.Closer
	ended   bool // the entry's end was checked
}

func (s *npySource) read(r *row, want int, missing bool) error {
	if s.row == s.rows {
		if !s.ended {
			// The last stream reads the file's last element: its end is
			// the entry's, checked once.
			if err := s.streams[len(s.streams)-1].end(); err != nil {
				return err
			}
			s.ended = true
		}
		return io.EOF
	}
	s.row++
	r.vals, r.ints = r.vals[:0], s.h.kind != 'f'
	if cols := len(s.streams) * s.per; want >= 0 && cols != want {
		return ingest.Errorf(name, s.name, s.row, 0, "%d columns, want %d", cols, want)
	}
	for _, e := range s.streams {
		for range s.per {
			v, err := e.next()
			if err != nil {
				if fe, ok := err.(*ingest.FormatError); ok && fe.Line == 0 {
					fe.Line, fe.Field = s.row, len(r.vals)+1
				}
				return err
			}
			if math.IsNaN(v) && !missing {
				return ingest.Errorf(name, s.name, s.row, len(r.vals)+1, "nan in a feature column")
			}
			if math.IsInf(v, 0) {
				return ingest.Errorf(name, s.name, s.row, len(r.vals)+1, "%v is not a finite number", v)
			}
			r.vals = append(r.vals, v)
		}
	}
	return nil
}

func (s *npySource) where() (string, int64) { return s.name, s.row }

func (s *npySource) Close() error {
	var err error
	for _, c := range s.closers {
		if cerr := c.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// String names the array's shape for errors.
func (h npyHeader) String() string {
	parts := make([]string, len(h.shape))
	for i, d := range h.shape {
		parts[i] = strconv.FormatInt(d, 10)
	}
	return fmt.Sprintf("(%s)", strings.Join(parts, ", "))
}
