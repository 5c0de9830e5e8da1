package ogb_test

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/augloader/augloader/ingest"
	"github.com/augloader/augloader/ingest/convert"
	"github.com/augloader/augloader/internal/testkit/fixture"
)

func TestMain(m *testing.M) { fixture.Main(m) }

// outcome is what converting in gave (fixture.Converted).
func outcome(t *testing.T, in string) (string, error) {
	t.Helper()
	return fixture.Converted(t, in, convert.Options{})
}

// A csv.gz cut short anywhere (a download that stopped) is refused: every
// cut of every file of a dataset, from one byte to all but one, never
// converts (Python's gzip refuses them all; the reader once turned the
// inflater's unexpected end into a clean one and kept the rows before it,
// a target 0.123456789 becoming 0.1234568 or 0).
func TestTruncatedGzipEveryCut(t *testing.T) {
	files := base()
	files["graph-label"] = "0.123456789,1\n0.5,0\n" // the case: the last value's digits
	dir := folder(t, files)
	want, err := outcome(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, p)
		}
		return nil
	})
	cuts := 0
	for _, p := range names {
		whole, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for n := 1; n < len(whole); n++ {
			if err := os.WriteFile(p, whole[:n], 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := outcome(t, dir)
			cuts++
			switch {
			case err == nil && got != want:
				t.Fatalf("%s cut to %d of %d bytes converted to other data:\n%s\nwant\n%s", p, n, len(whole), got, want)
			case err == nil:
				t.Fatalf("%s cut to %d of %d bytes converted (to the same data, but a cut gzip must be refused)", p, n, len(whole))
			case !errors.Is(err, ingest.ErrFormat) || !strings.Contains(err.Error(), filepath.Base(p)):
				t.Fatalf("%s cut to %d bytes: %v (want an input error naming the file)", p, n, err)
			}
		}
		os.WriteFile(p, whole, 0o644)
	}
	if got, err := outcome(t, dir); err != nil || got != want {
		t.Fatalf("restored: %v", err)
	}
	t.Logf("%d cuts of %d files refused", cuts, len(names))
}

// npzBytes is arrays as numpy.savez (stored) or savez_compressed
// (deflated) writes them, in name order.
func npzBytes(arrays map[string]npy, method uint16) []byte {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	names := make([]string, 0, len(arrays))
	for k := range arrays {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, name := range names {
		w, _ := zw.CreateHeader(&zip.FileHeader{Name: name + ".npy", Method: method})
		w.Write(arrays[name].bytes())
	}
	zw.Close()
	return b.Bytes()
}

// An npz with one byte flipped anywhere, stored or deflated, converts to
// exactly the intact input's graphs or is refused: NumPy refuses the same
// files ("Bad CRC-32"). The .npy reader stops at an array's declared
// shape, before the zip reader's CRC check at the entry's end; and a
// flipped byte of a name in the zip's directory (which no checksum
// covers) made node_feat an array nobody reads.
func TestNpzFlippedBytes(t *testing.T) {
	data, labels := baseNpz()
	// Column-major feature blocks too: their columns are read in
	// several places of the entry at once.
	nf := data["node_feat"]
	nf.fortran = true
	data["node_feat"] = nf
	for _, method := range []uint16{zip.Store, zip.Deflate} {
		t.Run(map[uint16]string{zip.Store: "stored", zip.Deflate: "deflated"}[method], func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ogbg-flip")
			os.MkdirAll(filepath.Join(dir, "raw"), 0o755)
			p := filepath.Join(dir, "raw", "data.npz")
			whole := npzBytes(data, method)
			os.WriteFile(filepath.Join(dir, "raw", "graph-label.npz"), npzBytes(map[string]npy{"graph_label": labels}, method), 0o644)
			os.WriteFile(p, whole, 0o644)
			want, err := outcome(t, dir)
			if err != nil {
				t.Fatal(err)
			}
			// A seeded sample of 400 positions (all of them, about 1,500,
			// passed when this was written; with -short, 100).
			positions := make([]int, len(whole))
			for i := range positions {
				positions[i] = i
			}
			rng := rand.New(rand.NewPCG(1, uint64(method)))
			rng.Shuffle(len(positions), func(i, j int) { positions[i], positions[j] = positions[j], positions[i] })
			positions = positions[:min(len(positions), 400)]
			if testing.Short() {
				positions = positions[:100]
			}
			same, refused := 0, 0
			for _, i := range positions {
				for _, mask := range []byte{0x01, 0x80} {
					b := slices.Clone(whole)
					b[i] ^= mask
					os.WriteFile(p, b, 0o644)
					got, err := outcome(t, dir)
					switch {
					case err != nil:
						refused++
					case got != want:
						t.Fatalf("byte %d ^ %#x of %d converted to other data:\n%s\nwant\n%s", i, mask, len(whole), got, want)
					default:
						same++
					}
				}
			}
			t.Logf("%d flips: %d refused, %d gave the intact graphs (a byte no reader depends on: a time, an attribute)", 2*len(positions), refused, same)
		})
	}
}

// gzipped is body gzip'd.
func gzipped(body string) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(body))
	zw.Close()
	return b.Bytes()
}

// A graph listing its edges many times over is compacted as it is read
// (each edge and direction held once): the same shards and stats as
// without compaction, and a listing whose features contradict its edge's
// first is refused naming both lines, compacted or not.
func TestRepeatedListingsCompacted(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var edges, feats strings.Builder
	const n, m = 6, 400
	type pair struct{ u, v int }
	feat := map[pair]int{}
	for range m {
		u, v := rng.IntN(n), rng.IntN(n)
		p := pair{min(u, v), max(u, v)}
		if _, ok := feat[p]; !ok {
			feat[p] = rng.IntN(5)
		}
		fmt.Fprintf(&edges, "%d,%d\n", u, v)
		fmt.Fprintf(&feats, "%d,1\n", feat[p])
	}
	files := map[string]string{
		"edge": edges.String(), "edge-feat": feats.String(),
		"num-node-list": fmt.Sprintf("%d\n", n), "num-edge-list": fmt.Sprintf("%d\n", m), "graph-label": "1\n",
	}
	dir := folder(t, files)
	want, err := outcome(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func(old int) { ingest.CompactMin = old }(ingest.CompactMin)
	ingest.CompactMin = 7
	got, err := outcome(t, dir)
	if err != nil || got != want {
		t.Fatalf("compacted every 7 listings: %v\n%s\nwant\n%s", err, got, want)
	}
	// A contradicting listing late in the file.
	lines := strings.Split(strings.TrimSpace(feats.String()), "\n")
	e := strings.Split(strings.TrimSpace(edges.String()), "\n")
	unordered := func(l string) pair {
		var u, v int
		fmt.Sscanf(l, "%d,%d", &u, &v)
		return pair{min(u, v), max(u, v)}
	}
	var firstLine int
	for i := range e {
		if unordered(e[i]) == unordered(e[len(e)-1]) {
			firstLine = i + 1
			break
		}
	}
	lines[len(lines)-1] = "9,1"
	files["edge-feat"] = strings.Join(lines, "\n") + "\n"
	wantErr := fmt.Sprintf("raw/edge-feat.csv.gz:%d: graph 0: edge", m)
	wantFirst := fmt.Sprintf("than on line %d, where it is listed first", firstLine)
	for _, cm := range []int{7, 1 << 20} {
		ingest.CompactMin = cm
		_, err := outcome(t, folder(t, files))
		if err == nil || !strings.Contains(err.Error(), wantErr) || !strings.Contains(err.Error(), wantFirst) {
			t.Fatalf("compacting at %d: %v, want %q … %q", cm, err, wantErr, wantFirst)
		}
	}
}

// FuzzDamagedInput: an OGB folder (csv.gz, and npz stored and deflated)
// with one file cut short and a byte flipped anywhere converts to
// exactly the intact folder's shards or is refused, never to other data.
func FuzzDamagedInput(f *testing.F) {
	layouts := []string{}
	wants := map[string]string{}
	var files [][]string // per layout: its files
	root := f.TempDir()
	mk := func(name string, write func(dir string)) {
		dir := filepath.Join(root, name, "ogbg-fuzz")
		write(dir)
		layouts = append(layouts, dir)
		var fs []string
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				rel, _ := filepath.Rel(dir, p)
				fs = append(fs, rel)
			}
			return nil
		})
		files = append(files, fs)
	}
	mk("csv", func(dir string) {
		for name, body := range base() {
			p := filepath.Join(dir, "raw", name+".csv.gz")
			if strings.HasPrefix(name, "split/") {
				p = filepath.Join(dir, name+".csv.gz")
			}
			os.MkdirAll(filepath.Dir(p), 0o755)
			os.WriteFile(p, gzipped(body), 0o644)
		}
	})
	for _, method := range []uint16{zip.Store, zip.Deflate} {
		mk(fmt.Sprintf("npz%d", method), func(dir string) {
			data, labels := baseNpz()
			os.MkdirAll(filepath.Join(dir, "raw"), 0o755)
			os.WriteFile(filepath.Join(dir, "raw", "data.npz"), npzBytes(data, method), 0o644)
			os.WriteFile(filepath.Join(dir, "raw", "graph-label.npz"), npzBytes(map[string]npy{"graph_label": labels}, method), 0o644)
		})
	}
	for i := range 12 {
		f.Add(uint8(i), uint32(i*37), uint32(i*101), uint8(1<<(i%8)))
	}
	f.Fuzz(func(t *testing.T, which uint8, cut, pos uint32, mask uint8) {
		li := int(which) % len(layouts)
		src := layouts[li]
		want, ok := wants[src]
		if !ok {
			var err error
			if want, err = outcome(t, src); err != nil {
				t.Fatal(err)
			}
			wants[src] = want
		}
		dir := filepath.Join(t.TempDir(), "ogbg-fuzz")
		if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
			t.Fatal(err)
		}
		rel := files[li][int(which/uint8(len(layouts)))%len(files[li])]
		p := filepath.Join(dir, rel)
		b, _ := os.ReadFile(p)
		if n := int(cut) % (len(b) + 1); n < len(b) {
			b = b[:n]
		}
		if len(b) > 0 {
			b[int(pos)%len(b)] ^= mask
		}
		os.WriteFile(p, b, 0o644)
		got, err := outcome(t, dir)
		if err == nil && got != want {
			t.Fatalf("%s damaged (cut %d, byte %d ^ %#x) converted to other data:\n%s\nwant\n%s", rel, cut, pos, mask, got, want)
		}
	})
}
