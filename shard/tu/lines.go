package tu

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/bits"
	"strconv"
)

// maxLine caps one line; TU lines are short (attribute rows are the longest).
const maxLine = 1 << 20

// lineReader yields lines without their terminator and without a trailing
// '\r', counting them for error messages. A blank line is allowed only at
// the end of the file.
type lineReader struct {
	br     *bufio.Reader
	file   string
	line   int64
	blanks int64 // blank lines seen and not yet followed by content

	// fastPairs' window of the buffer, and how much of it it consumed.
	win  []byte
	used int
}

func newLineReader(r io.Reader, file string) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 1<<20), file: file}
}

// next returns the next non-blank line, or io.EOF. The slice is valid until
// the following call.
func (l *lineReader) next() ([]byte, error) {
	l.sync()
	for {
		b, err := l.br.ReadSlice('\n')
		if err != nil && errors.Is(err, bufio.ErrBufferFull) {
			return nil, formatErr(l.file, l.line+1, 0, "line longer than %d bytes", maxLine)
		}
		if err != nil && err != io.EOF {
			return nil, formatErr(l.file, l.line+1, 0, "read: %v", err)
		}
		if len(b) == 0 && err == io.EOF {
			return nil, io.EOF
		}
		l.line++
		for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
			b = b[:len(b)-1]
		}
		if len(b) == 0 || (isSpace(b[0]) && len(bytes.TrimSpace(b)) == 0) {
			l.blanks++
			if err == io.EOF {
				return nil, io.EOF
			}
			continue
		}
		if l.blanks > 0 {
			return nil, formatErr(l.file, l.line-l.blanks, 0, "blank line inside the file")
		}
		return b, nil
	}
}

// fastPairs parses in place the plain "a, b" lines (scanPairs' form) that
// come next in the buffered bytes — nearly every line of an A file —
// appending each as a<<32 | b to dst and counting them as next would,
// without next's per-line machinery: lines are cut from a window of the
// buffer that is handed back (Discard) only when fastPairs runs dry or next
// is called. It stops before any other line (and one that reaches the end
// of the buffered bytes), consuming nothing of it: the caller takes next and
// pair, which also handle '\r', blanks, the end of the buffer and every
// fault.
func (l *lineReader) fastPairs(dst []uint64) []uint64 {
	if l.blanks > 0 {
		return dst
	}
	b := l.win[l.used:]
	if len(b) < 64 {
		l.sync()
		l.win, _ = l.br.Peek(l.br.Buffered())
		b = l.win
	}
	start := len(dst)
	dst, n := scanPairs(b, dst)
	l.used += n
	l.line += int64(len(dst) - start)
	return dst
}

// sync hands the lines fastPairs cut from its window back to the buffer.
func (l *lineReader) sync() {
	if l.used > 0 {
		l.br.Discard(l.used)
	}
	l.win, l.used = nil, 0
}

// pair parses the common "a, b" / "a,b" line with no other content; ok is
// false for anything else, and the caller takes the slow path that names
// the fault.
func pair(b []byte) (a, c int64, ok bool) {
	a, c, i, ok := scanPair(b)
	return a, c, ok && i == len(b)
}

// scanPair reads "a, b" at the start of b — blanks (spaces only) around
// two unsigned integers of at most 15 digits and the comma between them —
// and returns them and the index after the trailing spaces.
func scanPair(b []byte) (a, c int64, i int, ok bool) {
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

// scanPairSWAR is scanPair for the common line "a, b" / "a,b" with
// numbers of 1 to 8 digits and no leading blank, eight bytes at a time
// (SWAR: one load finds where a number's digits end, three multiplies
// give its value); anything else, and a window too short for its 8-byte
// loads, goes to scanPair. Both give the same result wherever this one
// answers (TestScanPairSWAR, FuzzFastPair).
func scanPairSWAR(b []byte) (a, c int64, i int, ok bool) {
	if len(b) < 32 {
		return scanPair(b)
	}
	a, n := digits8(binary.LittleEndian.Uint64(b))
	if n == 0 || n == 8 || b[n] != ',' {
		return scanPair(b)
	}
	i = n + 1
	for i < 24 && b[i] == ' ' {
		i++
	}
	c, n = digits8(binary.LittleEndian.Uint64(b[i:]))
	if n == 0 || n == 8 {
		return scanPair(b)
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

func isSpace(c byte) bool { return c == ' ' || c == '\t' }

// parseInt parses a decimal integer at b[i:], skipping blanks before it, and
// returns the value and the index after it. field numbers errors.
func (l *lineReader) parseInt(b []byte, i, field int) (int64, int, error) {
	for i < len(b) && isSpace(b[i]) {
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
			return 0, i, formatErr(l.file, l.line, field, "%q overflows", fieldText(b, start))
		}
		v = v*10 + int64(b[i]-'0')
		i++
		digits++
	}
	if digits == 0 || (i < len(b) && !isSpace(b[i]) && b[i] != ',') {
		// Accept integral floats such as "1.0" or "-1.000000", which some TU
		// label files use.
		if f, err := strconv.ParseFloat(string(fieldText(b, start)), 64); err == nil && f == float64(int64(f)) {
			return int64(f), start + len(fieldText(b, start)), nil
		}
		return 0, i, formatErr(l.file, l.line, field, "%q is not an integer", fieldText(b, start))
	}
	if neg {
		v = -v
	}
	return v, i, nil
}

// fieldText returns the field starting at b[i:], up to a comma or blank.
func fieldText(b []byte, i int) []byte {
	j := i
	for j < len(b) && b[j] != ',' && !isSpace(b[j]) {
		j++
	}
	return b[i:j]
}

// expectComma skips blanks and one comma.
func (l *lineReader) expectComma(b []byte, i, field int) (int, error) {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	if i >= len(b) || b[i] != ',' {
		return i, formatErr(l.file, l.line, field, "missing field (want %d comma-separated values)", field)
	}
	return i + 1, nil
}

// expectEnd checks nothing but blanks follows.
func (l *lineReader) expectEnd(b []byte, i, fields int) error {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	if i != len(b) {
		return formatErr(l.file, l.line, fields+1, "unexpected %q after %d value(s)", b[i:], fields)
	}
	return nil
}

// nextInt reads the next line as one integer (io.EOF after the last
// line): the form of every one-value-per-line file of the format.
func (l *lineReader) nextInt() (int64, error) {
	b, err := l.next()
	if err != nil {
		return 0, err
	}
	v, i, err := l.parseInt(b, 0, 1)
	if err != nil {
		return 0, err
	}
	return v, l.expectEnd(b, i, 1)
}

// readInts reads a one-integer-per-line file (the first column of a
// comma-separated file is an error) and returns the values.
func readInts(r io.Reader, file string, hint int) ([]int64, error) {
	l := newLineReader(r, file)
	out := make([]int64, 0, hint)
	for {
		v, err := l.nextInt()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
}
