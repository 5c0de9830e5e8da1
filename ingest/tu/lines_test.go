package tu

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/augloader/augloader/ingest/internal/text"
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

// How readPairs reads.
const (
	bySlowPath = iota // next and pair alone
	byFastPath        // fastPairs, then next and pair
	byBlocks          // pairReader, blocks of 8 to 307 bytes
)

// readPairs reads every A line as Graphs does, in one of the ways above,
// and lists what it saw: line number and pair, or the error.
func readPairs(data []byte, how int, seed uint64) []string {
	src := &chunky{data, rand.New(rand.NewPCG(seed, 9)), []int{200, 1 << 16}[seed%2]}
	l := text.NewReader(src, name, "F_A.txt")
	var pr *pairReader
	if how == byBlocks {
		pr = newPairReader(src, "F_A.txt", 8+int(seed%300), nil)
		defer pr.close()
	}
	var out []string
	for {
		var pairs []uint64
		switch how {
		case byFastPath:
			pairs = l.FastPairs(nil)
		case byBlocks:
			pairs = pr.batch().pairs
			if pr.seq != nil {
				l = pr.seq
			}
		}
		for i, p := range pairs {
			line := l.Line
			if pr != nil {
				line = pr.lineNo()
			}
			out = append(out, fmt.Sprintf("%d: %d, %d", line-int64(len(pairs)-1-i), p>>32, p&(1<<32-1)))
		}
		if len(pairs) > 0 {
			continue
		}
		b, err := l.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			return append(out, "error: "+err.Error())
		}
		a, c, ok := text.Pair(b)
		if !ok {
			if a, c, err = l.SlowPair(b); err != nil {
				return append(out, "error: "+err.Error())
			}
		}
		out = append(out, fmt.Sprintf("%d: %d, %d", l.Line, a, c))
	}
}

// TestFastPairSameAsNext: the fast path and the parallel blocks yield
// exactly what next and pair yield — pairs, line numbers, errors — on lines
// of every shape: spacing, tabs, '\r', numbers of 1 to 19 digits, signs,
// junk, blank lines, a last line without '\n' — whatever the reads' and
// the blocks' sizes.
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
		want := readPairs(data, bySlowPath, uint64(trial))
		for _, how := range []int{byFastPath, byBlocks} {
			got := readPairs(data, how, uint64(trial))
			if fmt.Sprint(got) != fmt.Sprint(want) {
				for i := range min(len(got), len(want)) {
					if got[i] != want[i] {
						t.Fatalf("trial %d, way %d, item %d: %q, next %q", trial, how, i, got[i], want[i])
					}
				}
				t.Fatalf("trial %d, way %d: %d items, next %d", trial, how, len(got), len(want))
			}
		}
	}
}

// FuzzFastPair: on any bytes the fast path, the parallel blocks and next
// agree.
func FuzzFastPair(f *testing.F) {
	f.Add([]byte("1, 2\n2, 1\n"), uint64(1))
	f.Add([]byte("1234567, 7654321\n12345678, 1\n 3 ,4 \n\n"), uint64(2))
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		want := readPairs(data, bySlowPath, seed)
		for _, how := range []int{byFastPath, byBlocks} {
			if got := readPairs(data, how, seed); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("way %d %q\nnext  %q", how, got, want)
			}
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
			a1, c1, i1, ok1 := text.ScanPair(b)
			a2, c2, i2, ok2 := text.ScanPairSWAR(b)
			if ok1 != ok2 || (ok1 && (a1 != a2 || c1 != c2 || i1 != i2)) {
				t.Fatalf("%q: scanPair (%d, %d, %d, %v), SWAR (%d, %d, %d, %v)", b, a1, c1, i1, ok1, a2, c2, i2, ok2)
			}
		}
	}
}

// BenchmarkScanPairs parses 1 MiB blocks of "a, b" lines shaped like
// COLLAB's (numbers of 1 to 6 digits): the pairReader's per-block work.
//
//	go test -run XXX -bench ScanPairs -count 6 ./ingest/tu | benchstat -
func BenchmarkScanPairs(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	var buf bytes.Buffer
	for buf.Len() < 1<<20 {
		u := 1 + r.Int64N(372474)
		fmt.Fprintf(&buf, "%d, %d\n", u, u+1+r.Int64N(300))
	}
	data := buf.Bytes()
	data = data[:bytes.LastIndexByte(data, '\n')+1]
	lines := bytes.Count(data, []byte{'\n'})
	b.SetBytes(int64(len(data)))
	var dst []uint64
	b.ResetTimer()
	for range b.N {
		var n int
		dst, n = text.ScanPairs(data, dst[:0])
		if n != len(data) || len(dst) != lines {
			b.Fatalf("parsed %d of %d bytes, %d of %d lines", n, len(data), len(dst), lines)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*lines), "ns/line")
}
