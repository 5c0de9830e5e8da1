package docstest

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/augloader/augloader/internal/testkit/testutil"
)

// Figures quoted outside docs/bench.md are checked by name: each carries
// <!--fig:EXPR--> right after it, EXPR a name in docs/figures.tsv (which
// make bench writes with docs/bench.md: every figure of the run, under a
// name that says where it came from) or names and numbers joined by " ÷ "
// and " × ", and the figure must be EXPR's value at the figure's own
// precision ("1/21" quotes 21). A figure that is an observation of a test
// rather than a benchmark carries <!--observed:TEST--> naming a test that
// exists. A decimal with a unit of time, speed or ratio and no mark fails:
// the pages had drifted from bench.md (the README's to_tensors ratios
// appeared nowhere in it) while a check that a number occurred somewhere
// in bench.md passed.
//
// AUGLOADER_FIX_FIGURES=1 rewrites each stale quote in place to the
// latest make bench's value (the words around it are the author's to
// reread).
func TestFiguresByName(t *testing.T) {
	fix := os.Getenv("AUGLOADER_FIX_FIGURES") == "1"
	root := testutil.Root(t)
	figs := readFigures(t, filepath.Join(root, "docs", "figures.tsv"))
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	docs = append(docs, filepath.Join(root, "README.md"))
	marked := 0
	for _, p := range docs {
		if filepath.Base(p) == "bench.md" {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(p)
		text := prose(string(b))
		fixed := []byte(nil)
		last := 0
		for _, m := range figMark.FindAllStringSubmatchIndex(text, -1) {
			marked++
			expr := text[m[2]:m[3]]
			quoted := quotedFigure.FindStringSubmatch(text[:m[0]])
			at := quotedFigure.FindStringSubmatchIndex(text[:m[0]])
			if quoted == nil {
				t.Errorf("%s: <!--fig:%s--> follows no figure", name, expr)
				continue
			}
			want, err := evalFigure(expr, figs)
			if err != nil {
				t.Errorf("%s: %q <!--fig:%s-->: %v", name, quoted[0], expr, err)
				continue
			}
			if got := strings.ReplaceAll(quoted[1], ",", ""); formatLike(want, got) != got && fix {
				// prose keeps every offset: the quote is at the same
				// place in the file.
				fixed = append(append(fixed, b[last:at[2]]...), commas(formatLike(want, got), strings.Contains(quoted[1], ","))...)
				last = at[3]
			} else if formatLike(want, got) != got {
				t.Errorf("%s: quotes %s where %s is %s (docs/figures.tsv, the latest make bench): quote the figure as measured",
					name, quoted[1], expr, formatLike(want, got))
			}
		}
		if fixed != nil {
			if err := os.WriteFile(p, append(fixed, b[last:]...), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: stale quotes rewritten", name)
		}
		for _, m := range observedMark.FindAllStringSubmatch(text, -1) {
			marked++
			if !testExists(t, root, m[1]) {
				t.Errorf("%s: <!--observed:%s-->: no such test", name, m[1])
			}
		}
		for _, loc := range unmarked.FindAllStringIndex(text, -1) {
			rest := text[loc[1]:]
			if strings.HasPrefix(rest, "<!--fig:") || strings.HasPrefix(rest, "<!--observed:") {
				continue
			}
			t.Errorf("%s: %q is a measurement with no source: mark it <!--fig:NAME--> (docs/figures.tsv) or <!--observed:TEST-->",
				name, text[max(0, loc[0]-40):loc[1]])
		}
	}
	if marked < 20 {
		t.Fatalf("only %d marked figures: the marks or this test's patterns are off", marked)
	}
}

var (
	figMark      = regexp.MustCompile(`<!--fig:([^>]*?)-->`)
	observedMark = regexp.MustCompile(`<!--observed:([\w./:-]+)-->`)
	// The figure right before a mark, its unit (if any) between.
	quotedFigure = regexp.MustCompile(`(\d[\d,]*(?:\.\d+)?)(?:\s*(?:×|%|s|ms|MB/s|GB/s|MB|MiB|GiB|(?:COLLAB-shaped )?graphs/s|points))?\s*$`)
	// What reads as a measurement: a decimal with a unit of time, speed or
	// ratio, or a thousands-separated rate.
	unmarked  = regexp.MustCompile(`\d[\d,]*\.\d+\s*(?:×|%|s\b|ms\b|graphs/s|MB/s|GB/s)|\d{1,3}(?:,\d{3})+\s*(?:[\w-]+\s+)?graphs/s`)
	codeFence = regexp.MustCompile("(?s)```.*?```")
	codeSpan  = regexp.MustCompile("`[^`\n]*`")
)

// prose is a page without its code (commands and snippets hold flag
// values, not measurements), spans kept in place as blanks so the text
// around a mark stays as written.
func prose(s string) string {
	s = codeFence.ReplaceAllStringFunc(s, func(m string) string { return strings.Repeat(" ", len(m)) })
	return codeSpan.ReplaceAllStringFunc(s, func(m string) string { return "`" + strings.Repeat(" ", len(m)-2) + "`" })
}

func readFigures(t *testing.T, path string) map[string]float64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("%v (make bench writes it with docs/bench.md)", err)
	}
	defer f.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		name, v, ok := strings.Cut(line, "\t")
		x, err := strconv.ParseFloat(v, 64)
		if !ok || err != nil {
			t.Fatalf("%s: malformed line %q", path, line)
		}
		out[name] = x
	}
	return out
}

// evalFigure evaluates "A ÷ B × 100": names of figures and numbers,
// left to right.
func evalFigure(expr string, figs map[string]float64) (float64, error) {
	ops := figOp.FindAllStringSubmatch(expr, -1)
	var acc float64
	for i, tok := range figOp.Split(expr, -1) {
		v, err := strconv.ParseFloat(tok, 64)
		if err != nil {
			var ok bool
			if v, ok = figs[tok]; !ok {
				return 0, fmt.Errorf("no figure %q in docs/figures.tsv", tok)
			}
		}
		switch {
		case i == 0:
			acc = v
		case ops[i-1][1] == "÷":
			acc /= v
		default:
			acc *= v
		}
	}
	return acc, nil
}

var figOp = regexp.MustCompile(` ([÷×]) `)

// formatLike prints v with as many decimals as the quoted figure has.
func formatLike(v float64, quoted string) string {
	decimals := 0
	if _, frac, ok := strings.Cut(quoted, "."); ok {
		decimals = len(frac)
	}
	return strconv.FormatFloat(v, 'f', decimals, 64)
}

// testExists reports whether a Go test function (TestX, or pkg.TestX) or
// a Python test (test_x) of that name is in the tree.
func testExists(t *testing.T, root, name string) bool {
	t.Helper()
	name = name[strings.LastIndex(name, ".")+1:]
	found := false
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || found {
			return nil
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") && p != root {
			return filepath.SkipDir
		}
		if strings.HasSuffix(p, "_test.go") || (strings.HasSuffix(p, ".py") && strings.HasPrefix(d.Name(), "test_")) {
			b, err := os.ReadFile(p)
			if err == nil && (strings.Contains(string(b), "func "+name+"(") || strings.Contains(string(b), "def "+name+"(")) {
				found = true
			}
		}
		return nil
	})
	return found
}

// commas writes an integer part with thousands separators when sep.
func commas(x string, sep bool) string {
	if !sep {
		return x
	}
	whole, frac, dot := strings.Cut(x, ".")
	var out []byte
	for i := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, whole[i])
	}
	if dot {
		return string(out) + "." + frac
	}
	return string(out)
}
