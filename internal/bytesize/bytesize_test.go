package bytesize_test

import (
	"errors"
	"testing"

	"github.com/augloader/augloader/internal/bytesize"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "512": 512, "1KB": 1000, "1.5KB": 1500, "0.5KiB": 512, "64MiB": 64 << 20, "2gb": 2e9, " 1GiB ": 1 << 30,
		"1e3": 1000,
	} {
		if got, err := bytesize.Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	// A fraction of a byte is no byte count (--cache-limit 0.5 meant no
	// limit at all, silently; issue #45), nor is anything without digits.
	for _, in := range []string{"0.5", "0.9", "1e-9", "0.5B", "1.5", "0.1KB1", "", "MiB", "-1", "1PB", "inf", "NaN", "1e30"} {
		if got, err := bytesize.Parse(in); !errors.Is(err, bytesize.ErrSize) {
			t.Errorf("Parse(%q) = %d, %v; want ErrSize", in, got, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"0.5", "64MiB", "1e-9", "1.5KB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := bytesize.Parse(s)
		if err != nil {
			return
		}
		if n < 0 {
			t.Fatalf("Parse(%q) = %d", s, n)
		}
		back, err := bytesize.Parse(bytesize.Format(n))
		if err != nil || back != n {
			t.Fatalf("Format(%d) = %q reads back as %d, %v", n, bytesize.Format(n), back, err)
		}
	})
}

func TestHuman(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{{0, "0B"}, {1023, "1023B"}, {1024, "1.0KiB"}, {13074, "12.8KiB"}, {64 << 20, "64.0MiB"}, {3 << 30, "3.0GiB"}, {1<<30 + 1<<29, "1.5GiB"}} {
		if got := bytesize.Human(c.n); got != c.want {
			t.Errorf("Human(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}
