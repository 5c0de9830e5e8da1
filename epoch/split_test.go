package epoch_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/augloader/augloader/epoch"
)

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A split file is refused, naming what is wrong, unless both sets are
// given, in range, without repeats and disjoint. The first two cases were
// served silently: a file without "test" served every graph as that
// fold's test set, and overlapping sets were served as given.
func TestReadSplit(t *testing.T) {
	cases := []struct{ name, body, want string }{
		{"ok", `{"training": [0, 2, 3], "test": [1, 4]}`, ""},
		{"empty test", `{"training": [0, 1], "test": []}`, ""},
		{"no test key", `{"training": [0, 1, 2]}`, `needs both "training" and "test"`},
		{"null test", `{"training": [0, 1, 2], "test": null}`, `needs both "training" and "test"`},
		{"no training key", `{"test": [0]}`, `needs both "training" and "test"`},
		{"null", `null`, `needs both`},
		{"overlap", `{"training": [0, 1, 2, 3], "test": [3, 1, 4]}`, "2 ids are in both the training and the test set: [1 3]"},
		{"twice", `{"training": [0, 0], "test": [1]}`, "training lists id 0 twice"},
		{"range", `{"training": [0], "test": [5]}`, "test id 5 out of range 0..4"},
		{"unknown key", `{"training": [0], "test": [1], "validation": [2]}`, "unknown field"},
		{"valid set", `{"training": [0], "valid": [2], "test": [1]}`, ""},
		{"valid overlaps test", `{"training": [0], "valid": [1, 2], "test": [1]}`, "1 ids are in both the valid and the test set: [1]"},
		{"not json", `{"training": [0`, "unexpected EOF"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "fold-00.json")
			writeFile(t, p, c.body)
			s, err := epoch.ReadSplit(p, 5)
			if c.want == "" {
				if err != nil || s == nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !errors.Is(err, epoch.ErrSplit) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
				t.Fatalf("got %v, want an ErrSplit naming %s and saying %q", err, p, c.want)
			}
		})
	}
	// Many overlapping ids: the first ten, and how many more.
	p := filepath.Join(t.TempDir(), "s.json")
	writeFile(t, p, `{"training": [0,1,2,3,4,5,6,7,8,9,10,11], "test": [0,1,2,3,4,5,6,7,8,9,10,11]}`)
	if _, err := epoch.ReadSplit(p, 20); err == nil || !strings.Contains(err.Error(), "[0 1 2 3 4 5 6 7 8 9] and 2 more") {
		t.Fatalf("got %v", err)
	}
}

// --fold N is the file numbered N, whatever the names' padding or how
// they sort: with 120 folds fold-100.json sorted before fold-11.json
// and --fold 99 served fold-79.json; a missing file shifted every later
// fold by one.
func TestFoldFiles(t *testing.T) {
	dir := t.TempDir()
	folds := make([]epoch.Split, 120)
	for i := range folds {
		folds[i] = epoch.Split{Training: []int64{int64(i)}}
	}
	var written []string
	write := func(p string, b []byte) error {
		written = append(written, filepath.Base(p))
		return os.WriteFile(p, b, 0o644)
	}
	if err := epoch.WriteFolds(dir, folds, false, write); err != nil {
		t.Fatal(err)
	}
	if written[0] != "fold-000.json" || written[99] != "fold-099.json" || written[119] != "fold-119.json" {
		t.Fatalf("names %s %s %s", written[0], written[99], written[119])
	}
	if !slices.IsSorted(written) {
		t.Fatal("the names do not sort in fold order")
	}
	files, err := epoch.FoldFiles(dir)
	if err != nil || len(files) != 120 {
		t.Fatalf("%d files, %v", len(files), err)
	}
	for i, f := range files {
		s, err := epoch.ReadSplit(f, 200)
		if err != nil || len(s.Training) != 1 || s.Training[0] != int64(i) || s.Test == nil {
			t.Fatalf("fold %d is %s: %+v %v", i, filepath.Base(f), s, err)
		}
	}
	// A second split into the same folder is refused unless forced.
	if err := epoch.WriteFolds(dir, folds[:10], false, write); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("rewrite without force: %v", err)
	}
	if err := epoch.WriteFolds(dir, folds[:10], true, write); err != nil {
		t.Fatal(err)
	}
	if files, err := epoch.FoldFiles(dir); err != nil || len(files) != 10 || filepath.Base(files[9]) != "fold-09.json" {
		t.Fatalf("after --force: %v %v", files, err)
	}

	// Hand-made folders: numbers from the names, gaps and twins refused.
	bad := []struct {
		name  string
		files []string
		want  string
	}{
		{"unpadded", []string{"fold-0.json", "fold-1.json", "fold-10.json", "fold-2.json", "fold-3.json", "fold-4.json", "fold-5.json", "fold-6.json", "fold-7.json", "fold-8.json", "fold-9.json"}, ""},
		{"gap", []string{"fold-00.json", "fold-01.json", "fold-02.json", "fold-04.json"}, "fold-04.json, but there are only 4 fold files"},
		{"twins", []string{"fold-00.json", "fold-1.json", "fold-01.json"}, "are both fold 1"},
		{"not a number", []string{"fold-00.json", "fold-a.json"}, "fold-a.json is not fold-NUMBER.json"},
		{"signed", []string{"fold-00.json", "fold-+1.json"}, "not fold-NUMBER.json"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			d := t.TempDir()
			for _, f := range c.files {
				writeFile(t, filepath.Join(d, f), `{"training": [], "test": []}`)
			}
			files, err := epoch.FoldFiles(d)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				for i, f := range files {
					if want := filepath.Join(d, "fold-"+strconv.Itoa(i)+".json"); f != want {
						t.Fatalf("fold %d is %s", i, f)
					}
				}
				return
			}
			if err == nil || !errors.Is(err, epoch.ErrSplit) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
}
