package ogb

import (
	"archive/zip"
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// FuzzNpyHeader: any header text is parsed or refused, never a panic.
func FuzzNpyHeader(f *testing.F) {
	f.Add("{'descr': '<i8', 'fortran_order': False, 'shape': (2, 20), }")
	f.Add("{'descr': '|u1', 'fortran_order': True, 'shape': (7,), }")
	f.Add("{'descr': '<f4', 'fortran_order': False, 'shape': (), }")
	f.Fuzz(func(t *testing.T, s string) {
		h, err := parseNpyHeader(s, "x.npy")
		if err == nil && (h.size == 0 || len(h.shape) > 2) {
			t.Fatalf("accepted %q as %+v", s, h)
		}
	})
}

// FuzzUnpickle: any bytes are unpickled or refused, never a panic, and
// a value found is read as ids or refused.
func FuzzUnpickle(f *testing.F) {
	files, _ := filepath.Glob("testdata/split_*.pt")
	for _, p := range files {
		body, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		zr, err := zip.NewReader(bytes.NewReader(body), int64(len(body)))
		if err != nil {
			f.Fatal(err)
		}
		for _, e := range zr.File {
			if filepath.Base(e.Name) == "data.pkl" {
				b, err := readZipEntry(e, 1<<20)
				if err != nil {
					f.Fatal(err)
				}
				f.Add(b)
			}
		}
	}
	empty := zip.NewWriter(&bytes.Buffer{})
	empty.Close()
	f.Fuzz(func(t *testing.T, b []byte) {
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		v, err := unpickle(b)
		runtime.ReadMemStats(&ms1)
		// What it builds is bounded by its bytes, whatever the opcodes.
		if got, budget := int64(ms1.TotalAlloc-ms0.TotalAlloc), 4*pickleBudget(len(b)); got > budget {
			t.Fatalf("unpickling %d bytes allocated %d (budget %d)", len(b), got, budget)
		}
		if err != nil {
			return
		}
		if d, ok := v.(*pyDict); ok {
			for _, x := range d.vals {
				pyInts(x, &zip.Reader{}, "archive/", 1000)
			}
		}
	})
}
