package ogb

// Rows of a CSV (plain or gzip) with their place, and the cursor a
// column's rows are read through.

import (
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/augloader/augloader/ingest"
	"github.com/augloader/augloader/ingest/internal/text"
)

// rowSource yields one file's rows: a csv.gz file's lines, or an .npy
// array's rows.
type rowSource interface {
	// read parses the next row into r (want >= 0: the fields it must
	// have; missing: empty fields and nan allowed, as NaN); io.EOF past
	// the last.
	read(r *row, want int, missing bool) error
	// where names the row read last: the file as shown, and its line.
	where() (string, int64)
	io.Closer
}

// csvSource is a csv.gz file's rows.
type csvSource struct {
	rc io.ReadCloser
	l  *text.Reader
}

func (s *csvSource) read(r *row, want int, missing bool) error {
	b, err := s.l.Next()
	if err != nil {
		return err
	}
	return r.parse(s.l.File, s.l.Line, b, want, missing)
}

func (s *csvSource) where() (string, int64) { return s.l.File, s.l.Line }

func (s *csvSource) Close() error { return s.rc.Close() }

// row is one parsed comma-separated row.
type row struct {
	vals []float64
	ints bool // every field an integer
}

// parse parses b into r; want >= 0 is the field count required (a ragged
// row is an error naming it); missing allows empty and nan fields (NaN).
func (r *row) parse(file string, line int64, b []byte, want int, missing bool) error {
	r.vals, r.ints = r.vals[:0], true
	field := 0
	for i := 0; ; {
		field++
		j := i
		for j < len(b) && b[j] != ',' {
			j++
		}
		tok := b[i:j]
		for len(tok) > 0 && text.IsSpace(tok[0]) {
			tok = tok[1:]
		}
		for len(tok) > 0 && text.IsSpace(tok[len(tok)-1]) {
			tok = tok[:len(tok)-1]
		}
		v, isInt, ok := number(tok)
		switch {
		case ok && math.IsInf(v, 0):
			return ingest.Errorf(name, file, line, field, "%q is not a finite number", tok)
		case !ok && bigInteger(tok):
			return ingest.Errorf(name, file, line, field, "%v", ingest.BeyondFloat64(string(tok)))
		case ok:
		case missing && (len(tok) == 0 || strings.EqualFold(string(tok), "nan")):
			v, isInt = math.NaN(), false
		default:
			return ingest.Errorf(name, file, line, field, "%q is not a number", tok)
		}
		r.ints = r.ints && isInt
		r.vals = append(r.vals, v)
		if j == len(b) {
			break
		}
		i = j + 1
	}
	if want >= 0 && len(r.vals) != want {
		return ingest.Errorf(name, file, line, 0, "%d fields, the file's first row has %d", len(r.vals), want)
	}
	return nil
}

// bigInteger reports whether tok is an integer too long for number to
// take as one: its value beyond ±2^53.
func bigInteger(tok []byte) bool {
	t := tok
	if len(t) > 0 && (t[0] == '-' || t[0] == '+') {
		t = t[1:]
	}
	if len(t) <= 15 {
		return false
	}
	for _, c := range t {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// number parses an integer (fast) or a float token. An integer token of
// more than 15 digits is taken when a float64 holds it exactly (below
// 2^53); beyond, not at all (bigInteger says why).
func number(tok []byte) (float64, bool, bool) {
	if len(tok) == 0 {
		return 0, false, false
	}
	i, neg := 0, false
	if tok[0] == '-' || tok[0] == '+' {
		neg, i = tok[0] == '-', 1
	}
	if i < len(tok) && len(tok)-i <= 15 {
		var v int64
		k := i
		for k < len(tok) && tok[k] >= '0' && tok[k] <= '9' {
			v = v*10 + int64(tok[k]-'0')
			k++
		}
		if k == len(tok) && k > i {
			if neg {
				v = -v
			}
			return float64(v), true, true
		}
	}
	if bigInteger(tok) {
		v, err := strconv.ParseInt(string(tok), 10, 64)
		if err != nil || v >= 1<<53 || v <= -(1<<53) {
			return 0, false, false
		}
		return float64(v), true, true
	}
	f, err := strconv.ParseFloat(string(tok), 64)
	if err != nil || math.IsNaN(f) {
		return 0, false, false
	}
	return f, false, true
}

// cursor reads one file's rows graph by graph: total rows, one per node,
// edge or graph (what), as the count lists say.
type cursor struct {
	c     *columns // a feature file's columns; nil for the others
	src   rowSource
	r     row
	row   int64
	total int64
	what  string
}

func (d *Dataset) cursor(c *columns, file string, total int64, what string) (*cursor, error) {
	src, err := d.source(file)
	if err != nil {
		return nil, err
	}
	return &cursor{c: c, src: src, total: total, what: what}, nil
}

func (cu *cursor) close() {
	if cu != nil {
		cu.src.Close()
	}
}

// next parses the next row into cu.r; past the file's end, an error
// naming the count it fell short of.
func (cu *cursor) next(want int, missing bool) error {
	err := cu.src.read(&cu.r, want, missing)
	if err == io.EOF {
		file, line := cu.src.where()
		return formatErr(file, line, 0, "ends after %d rows; the count lists say %d %s", cu.row, cu.total, cu.what)
	}
	cu.row++
	return err
}

// end checks that the file has no rows left.
func (cu *cursor) end() error {
	if cu == nil {
		return nil
	}
	err := cu.src.read(&cu.r, -1, true)
	if err == io.EOF {
		return nil
	}
	if err != nil {
		return err
	}
	file, line := cu.src.where()
	return formatErr(file, line, 0, "more rows than the %d %s counted in the count lists", cu.total, cu.what)
}
