// Package text reads the line-oriented text of dataset files for the
// ingest readers: lines counted for error messages, integers and
// comma-separated fields parsed in place, and the plain "a, b" lines of
// edge lists parsed eight bytes at a time (SWAR). Every fault is an
// *ingest.FormatError naming the format, file, line and field.
package text

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/bits"
	"strconv"

	"github.com/augloader/augloader/ingest"
)

// maxLine caps one line; TU lines are short (attribute rows are the longest).
const maxLine = 1 << 20

// Reader yields lines without their terminator and without a trailing
// '\r', counting them for error messages. A blank line is allowed only at
// the end of the file.
type Reader struct {
	Format string // the reader's format, its errors' prefix
	File   string // the file's name in errors
	Line   int64  // lines read so far
	br     *bufio.Reader
	blanks int64 // blank lines seen and not yet followed by content

	// FastPairs' window of the buffer, and how much of it it consumed.
	win  []byte
	used int
}

// NewReader reads r, the file called file of a dataset in format.
func NewReader(r io.Reader, format, file string) *Reader {
	return &Reader{Format: format, File: file, br: bufio.NewReaderSize(r, 1<<20)}
}

// next returns the next non-blank line, or io.EOF. The slice is valid until
// the following call.
func (l *Reader) Next() ([]byte, error) {
	l.Sync()
	for {
		b, err := l.br.ReadSlice('\n')
		if err != nil && errors.Is(err, bufio.ErrBufferFull) {
			return nil, ingest.Errorf(l.Format, l.File, l.Line+1, 0, "line longer than %d bytes", maxLine)
		}
		if err != nil && err != io.EOF {
			return nil, ingest.Errorf(l.Format, l.File, l.Line+1, 0, "read: %v", err)
		}
		if len(b) == 0 && err == io.EOF {
			return nil, io.EOF
		}
		l.Line++
		for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
			b = b[:len(b)-1]
		}
		if len(b) == 0 || (IsSpace(b[0]) && len(bytes.TrimSpace(b)) == 0) {
			l.blanks++
			if err == io.EOF {
				return nil, io.EOF
			}
			continue
		}
		if l.blanks > 0 {
			return nil, ingest.Errorf(l.Format, l.File, l.Line-l.blanks, 0, "blank line inside the file")
		}
		return b, nil
	}
}

// FastPairs parses in place the plain "a, b" lines (ScanPairs' form) that
// come next in the buffered bytes — nearly every line of an A file —
// appending each as a<<32 | b to dst and counting them as next would,
// without next's per-line machinery: lines are cut from a window of the
// buffer that is handed back (Discard) only when FastPairs runs dry or next
// is called. It stops before any other line (and one that reaches the end
// of the buffered bytes), consuming nothing of it: the caller takes next and
// pair, which also handle '\r', blanks, the end of the buffer and every
// fault.
func (l *Reader) FastPairs(dst []uint64) []uint64 {
	if l.blanks > 0 {
		return dst
	}
	b := l.win[l.used:]
	if len(b) < 64 {
		l.Sync()
		l.win, _ = l.br.Peek(l.br.Buffered())
		b = l.win
	}
	start := len(dst)
	dst, n := ScanPairs(b, dst)
	l.used += n
	l.Line += int64(len(dst) - start)
	return dst
}

// sync hands the lines FastPairs cut from its window back to the buffer.
func (l *Reader) Sync() {
	if l.used > 0 {
		l.br.Discard(l.used)
	}
	l.win, l.used = nil, 0
}

// Pair parses the common "a, b" / "a,b" line with no other content; ok is
// false for anything else, and the caller takes the slow path that names
// the fault.
func Pair(b []byte) (a, c int64, ok bool) {
	a, c, i, ok := ScanPair(b)
	return a, c, ok && i == len(b)
}

// ScanPair reads "a, b" at the start of b — blanks (spaces only) around
// two unsigned integers of at most 15 digits and the comma between them —
// and returns them and the index after the trailing spaces.
func ScanPair(b []byte) (a, c int64, i int, ok bool) {
	n := len(b)
	for i < n && b[i] == ' ' {
		i++
	}
	s := i
	for i < n && b[i]-'0' <= 9 {
		a = a*10 + int64(b[i]-'0')
		i++
	}
	if i == s || i-s > 15 {
		return 0, 0, i, false
	}
	for i < n && b[i] == ' ' {
		i++
	}
	if i == n || b[i] != ',' {
		return 0, 0, i, false
	}
	i++
	for i < n && b[i] == ' ' {
		i++
	}
	s = i
	for i < n && b[i]-'0' <= 9 {
		c = c*10 + int64(b[i]-'0')
		i++
	}
	if i == s || i-s > 15 {
		return 0, 0, i, false
	}
	for i < n && b[i] == ' ' {
		i++
	}
	return a, c, i, true
}

// ScanPairSWAR is ScanPair for the common line "a, b" / "a,b" with
// numbers of 1 to 8 digits and no leading blank, eight bytes at a time
// (SWAR: one load finds where a number's digits end, three multiplies
// give its value); anything else, and a window too short for its 8-byte
// loads, goes to ScanPair. Both give the same result wherever this one
// answers (TestScanPairSWAR, FuzzFastPair).
func ScanPairSWAR(b []byte) (a, c int64, i int, ok bool) {
	if len(b) < 32 {
		return ScanPair(b)
	}
	a, n := digits8(binary.LittleEndian.Uint64(b))
	if n == 0 || n == 8 || b[n] != ',' {
		return ScanPair(b)
	}
	i = n + 1
	for i < 24 && b[i] == ' ' {
		i++
	}
	c, n = digits8(binary.LittleEndian.Uint64(b[i:]))
	if n == 0 || n == 8 {
		return ScanPair(b)
	}
	i += n
	for i < len(b) && b[i] == ' ' {
		i++
	}
	return a, c, i, true
}

// digits8 reads the decimal digits at the start of the 8 bytes in x
// (little-endian: the first byte lowest): their value and count (8: maybe
// more follow).
func digits8(x uint64) (int64, int) {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	d := x ^ (0x30 * ones) // a digit byte becomes 0..9
	nonDigit := (((d &^ highs) + 0x76*ones) | d) & highs
	n := bits.TrailingZeros64(nonDigit) / 8
	if n == 0 {
		return 0, 0
	}
	// The n digits to the top bytes, zeros (leading zeros) below, then
	// pairs, quads and octets of digits combined by multiplication.
	d <<= 8 * (8 - n)
	d = (d * (10<<8 + 1)) >> 8 & 0x00FF00FF00FF00FF
	d = (d * (100<<16 + 1)) >> 16 & 0x0000FFFF0000FFFF
	d = (d * (10000<<32 + 1)) >> 32
	return int64(d), n
}

func IsSpace(c byte) bool { return c == ' ' || c == '\t' }

// ParseInt parses a decimal integer at b[i:], skipping blanks before it, and
// returns the value and the index after it. field numbers errors.
func (l *Reader) ParseInt(b []byte, i, field int) (int64, int, error) {
	for i < len(b) && IsSpace(b[i]) {
		i++
	}
	start := i
	neg := false
	if i < len(b) && (b[i] == '-' || b[i] == '+') {
		neg = b[i] == '-'
		i++
	}
	var v int64
	digits := 0
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		if v > (1<<62)/10 {
			return 0, i, ingest.Errorf(l.Format, l.File, l.Line, field, "%q overflows", FieldText(b, start))
		}
		v = v*10 + int64(b[i]-'0')
		i++
		digits++
	}
	if digits == 0 || (i < len(b) && !IsSpace(b[i]) && b[i] != ',') {
		// Accept integral floats such as "1.0" or "-1.000000", which some TU
		// label files use.
		if f, err := strconv.ParseFloat(string(FieldText(b, start)), 64); err == nil && f == float64(int64(f)) {
			return int64(f), start + len(FieldText(b, start)), nil
		}
		return 0, i, ingest.Errorf(l.Format, l.File, l.Line, field, "%q is not an integer", FieldText(b, start))
	}
	if neg {
		v = -v
	}
	return v, i, nil
}

// FieldText returns the field starting at b[i:], up to a comma or blank.
func FieldText(b []byte, i int) []byte {
	j := i
	for j < len(b) && b[j] != ',' && !IsSpace(b[j]) {
		j++
	}
	return b[i:j]
}

// ExpectComma skips blanks and one comma.
func (l *Reader) ExpectComma(b []byte, i, field int) (int, error) {
	for i < len(b) && IsSpace(b[i]) {
		i++
	}
	if i >= len(b) || b[i] != ',' {
		return i, ingest.Errorf(l.Format, l.File, l.Line, field, "missing field (want %d comma-separated values)", field)
	}
	return i + 1, nil
}

// ExpectEnd checks nothing but blanks follows.
func (l *Reader) ExpectEnd(b []byte, i, fields int) error {
	for i < len(b) && IsSpace(b[i]) {
		i++
	}
	if i != len(b) {
		return ingest.Errorf(l.Format, l.File, l.Line, fields+1, "unexpected %q after %d value(s)", b[i:], fields)
	}
	return nil
}

// NextInt reads the next line as one integer (io.EOF after the last
// line): the form of every one-value-per-line file of the format.
func (l *Reader) NextInt() (int64, error) {
	b, err := l.Next()
	if err != nil {
		return 0, err
	}
	v, i, err := l.ParseInt(b, 0, 1)
	if err != nil {
		return 0, err
	}
	return v, l.ExpectEnd(b, i, 1)
}

// ReadInts reads a one-integer-per-line file (the first column of a
// comma-separated file is an error) and returns the values.
func ReadInts(r io.Reader, format, file string, hint int) ([]int64, error) {
	l := NewReader(r, format, file)
	out := make([]int64, 0, hint)
	for {
		v, err := l.NextInt()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
}

// SlowPair parses an A line that the fast path refused, naming the fault.
func (l *Reader) SlowPair(b []byte) (a, c int64, err error) {
	a, i, err := l.ParseInt(b, 0, 1)
	if err != nil {
		return 0, 0, err
	}
	if i, err = l.ExpectComma(b, i, 2); err != nil {
		return 0, 0, err
	}
	c, i, err = l.ParseInt(b, i, 2)
	if err != nil {
		return 0, 0, err
	}
	return a, c, l.ExpectEnd(b, i, 2)
}

// ScanPairs parses the plain "a, b" lines (ScanPairSWAR's form, both
// numbers below 2^32, '\n' inside b) at the start of b into dst as
// a<<32 | b, and returns dst and the bytes those lines took.
func ScanPairs(b []byte, dst []uint64) ([]uint64, int) {
	i := 0
	for i < len(b) {
		// The common line — numbers of 1 to 7 digits, ", " or ",", '\n' —
		// inside a 32-byte window, inline; any other goes to ScanPairSWAR,
		// which answers the same wherever this does.
		if len(b)-i >= 32 {
			w := b[i : i+32 : i+32]
			a, n := digits8(binary.LittleEndian.Uint64(w))
			if n != 0 && n != 8 && w[n] == ',' {
				j := n + 1
				if w[j] == ' ' {
					j++
				}
				c, m := digits8(binary.LittleEndian.Uint64(w[j:]))
				if j += m; m != 0 && m != 8 && w[j] == '\n' {
					dst = append(dst, uint64(a)<<32|uint64(c))
					i += j + 1
					continue
				}
			}
		}
		a, c, n, ok := ScanPairSWAR(b[i:])
		if !ok || i+n == len(b) || b[i+n] != '\n' || (a|c)>>32 != 0 {
			break
		}
		dst = append(dst, uint64(a)<<32|uint64(c))
		i += n + 1
	}
	return dst, i
}
