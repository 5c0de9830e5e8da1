package tu

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// chunky returns its data in random small pieces, so lines straddle the
// line reader's buffer fills.
type chunky struct {
	data []byte
	r    *rand.Rand
	max  int
}

func (c *chunky) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(c.data), 1+c.r.IntN(c.max))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// readPairs reads every A line as Graphs does, with or without the fast
// path, and lists what it saw: line number and pair, or the error.
func readPairs(data []byte, fast bool, seed uint64) []string {
	l := newLineReader(&chunky{data, rand.New(rand.NewPCG(seed, 9)), []int{200, 1 << 16}[seed%2]}, "F_A.txt")
	var out []string
	for {
		var a, c int64
		ok := false
		if fast {
			a, c, ok = l.fastPair()
		}
		if !ok {
			b, err := l.next()
			if err == io.EOF {
				return out
			}
			if err != nil {
				return append(out, "error: "+err.Error())
			}
			if a, c, ok = pair(b); !ok {
				if a, c, err = l.slowPair(b); err != nil {
					return append(out, "error: "+err.Error())
				}
			}
		}
		out = append(out, fmt.Sprintf("%d: %d, %d", l.line, a, c))
	}
}

// TestFastPairSameAsNext: the fast path yields exactly what next and pair
// yield — pairs, line numbers, errors — on lines of every shape: spacing,
// tabs, '\r', numbers of 1 to 19 digits, signs, junk, blank lines, a last
// line without '\n' — whatever the reads' sizes.
func TestFastPairSameAsNext(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	num := func() string {
		s := strconv.FormatInt(r.Int64N(10_000_000), 10)
		switch r.IntN(20) {
		case 0:
			s = strconv.FormatInt(r.Int64N(1<<62), 10)
		case 1:
			s = "-" + s
		case 2:
			s = "0" + s
		}
		return s
	}
	seps := []string{", ", ",", " , ", ",  ", "\t,", ", \t"}
	ends := []string{"\n", "\n", "\n", "\n", " \n", "\r\n", "\t\n", "x\n"}
	for trial := range 300 {
		var buf bytes.Buffer
		lines := r.IntN(400)
		for k := range lines {
			switch r.IntN(60) {
			case 0:
				buf.WriteString("\n") // blank: an error unless only blanks follow
			case 1:
				buf.WriteString(num() + "\n")
			default:
				buf.WriteString(num() + seps[r.IntN(len(seps))] + num())
				if k < lines-1 || r.IntN(2) == 0 {
					buf.WriteString(ends[r.IntN(len(ends))])
				}
			}
		}
		data := buf.Bytes()
		want, got := readPairs(data, false, uint64(trial)), readPairs(data, true, uint64(trial))
		if fmt.Sprint(got) != fmt.Sprint(want) {
			for i := range min(len(got), len(want)) {
				if got[i] != want[i] {
					t.Fatalf("trial %d, item %d: fast path %q, next %q", trial, i, got[i], want[i])
				}
			}
			t.Fatalf("trial %d: fast path %d items, next %d", trial, len(got), len(want))
		}
	}
}

// FuzzFastPair: on any bytes the fast path and next agree.
func FuzzFastPair(f *testing.F) {
	f.Add([]byte("1, 2\n2, 1\n"), uint64(1))
	f.Add([]byte("1234567, 7654321\n12345678, 1\n 3 ,4 \n\n"), uint64(2))
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		want, got := readPairs(data, false, seed), readPairs(data, true, seed)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("fast path %q\nnext      %q", got, want)
		}
	})
}

// scanPairSWAR answers as scanPair does, on pair lines of every shape
// (digit counts 1 to 17, blanks, leading zeros, junk) inside long and
// short windows.
func TestScanPairSWAR(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	num := func() string {
		n := 1 + r.IntN(17)
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('0' + r.IntN(10))
		}
		if r.IntN(4) == 0 {
			b[0] = '0'
		}
		return string(b)
	}
	blanks := func() string { return strings.Repeat(" ", r.IntN(3)*r.IntN(2)) }
	for range 200000 {
		line := blanks() + num() + blanks() + "," + blanks() + num() + blanks()
		if r.IntN(20) == 0 {
			line = line[:r.IntN(len(line)+1)] + string("x,\t\r-+"[r.IntN(6)]) + line[r.IntN(len(line)+1):]
		}
		for _, tail := range []string{"\n" + strings.Repeat("7, 8\n", 8), "\n", ""} {
			b := []byte(line + tail)
			a1, c1, i1, ok1 := scanPair(b)
			a2, c2, i2, ok2 := scanPairSWAR(b)
			if ok1 != ok2 || (ok1 && (a1 != a2 || c1 != c2 || i1 != i2)) {
				t.Fatalf("%q: scanPair (%d, %d, %d, %v), SWAR (%d, %d, %d, %v)", b, a1, c1, i1, ok1, a2, c2, i2, ok2)
			}
		}
	}
}
