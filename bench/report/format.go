package main

// Number formats shared by every section, and figures by name.

import (
	"math"
	"path/filepath"
	"strconv"
	"strings"
)

func (pg *page) fig(name string) string {
	p := filepath.Join(pg.docs, name)
	pg.wrote = append(pg.wrote, p)
	return p
}

// splitKV returns v from "...k=v/..." in a benchmark name.
func splitKV(name, k string) string {
	for part := range strings.SplitSeq(name, "/") {
		if v, ok := strings.CutPrefix(part, k+"="); ok {
			return v
		}
	}
	return ""
}

// Formatting; NaN (not measured) prints as "—".

func fs(x float64) string {
	if math.IsNaN(x) {
		return "—"
	}
	return strconv.FormatFloat(x, 'f', 3, 64)
}

func fms(x float64) string {
	switch {
	case math.IsNaN(x):
		return "—"
	case x >= 100:
		return fnum(x)
	case x >= 1:
		return strconv.FormatFloat(x, 'f', 2, 64)
	}
	return strconv.FormatFloat(x, 'f', 3, 64)
}

func fx(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "—"
	}
	if x >= 10 {
		return strconv.FormatFloat(x, 'f', 0, 64) + "×"
	}
	if x < 1 {
		return strconv.FormatFloat(x, 'f', 2, 64) + "×"
	}
	return strconv.FormatFloat(x, 'f', 1, 64) + "×"
}

// fnum rounds to an integer with thousands separators.
func fnum(x float64) string {
	if math.IsNaN(x) {
		return "—"
	}
	s := strconv.FormatFloat(math.Round(x), 'f', 0, 64)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// fsi prints a rate with an SI prefix (k, M, G).
func fsi(x float64) string {
	switch {
	case math.IsNaN(x):
		return "—"
	case x >= 1e9:
		return strconv.FormatFloat(x/1e9, 'f', 2, 64) + "G"
	case x >= 1e6:
		return strconv.FormatFloat(x/1e6, 'f', 1, 64) + "M"
	case x >= 1e3:
		return strconv.FormatFloat(x/1e3, 'f', 1, 64) + "k"
	}
	return strconv.FormatFloat(x, 'f', 0, 64)
}

func gbs(mbs float64) string {
	if math.IsNaN(mbs) {
		return "—"
	}
	return strconv.FormatFloat(mbs/1000, 'f', 1, 64) + " GB/s"
}

func mbsStr(mbs float64) string { return fnum(mbs) + " MB/s" }
