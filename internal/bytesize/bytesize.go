// Package bytesize reads and spells byte counts as every byte flag and
// option takes them: a number with an optional unit (B, KB, MB, GB, KiB,
// MiB, GiB; case-insensitive), e.g. 512MiB or 2GB.
package bytesize

import (
	"errors"
	"math"
	"strconv"
	"strings"
)

// ErrSize: not a byte count (a whole number of bytes).
var ErrSize = errors.New("bytesize: want a whole number of bytes such as 512MiB or 2GB")

// Parse reads a byte count.
func Parse(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := len(t)
	for i > 0 && (t[i-1] < '0' || t[i-1] > '9') && t[i-1] != '.' {
		i--
	}
	mult := map[string]float64{"": 1, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30}[strings.ToLower(strings.TrimSpace(t[i:]))]
	v, err := strconv.ParseFloat(t[:i], 64)
	// A whole number of bytes only: 0.5 (or 1e-9, 0.5B) read as 0, which
	// a limit takes as none, silently.
	if err != nil || mult == 0 || v < 0 || v*mult > 1<<62 || v*mult != math.Trunc(v*mult) {
		return 0, ErrSize
	}
	return int64(v * mult), nil
}

// HasUnit reports whether s ends in a unit (a letter): "64MiB", not "64".
func HasUnit(s string) bool {
	t := strings.TrimSpace(s)
	return t != "" && (t[len(t)-1] < '0' || t[len(t)-1] > '9')
}

// Format spells n bytes as Parse reads it, in the largest binary unit
// that divides it (1GiB, 512MiB, 1000B).
func Format(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// Human spells n bytes for a person, in the largest binary unit it
// reaches, one decimal (12.8MiB, 3.0GiB, 512B), as a flag takes the unit;
// Format spells a count exactly.
func Human(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size {
			return strconv.FormatFloat(float64(n)/float64(u.size), 'f', 1, 64) + u.name
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}
