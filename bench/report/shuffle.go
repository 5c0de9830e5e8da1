package main

import (
	"bytes"
	"fmt"
	"math"
	"strings"
)

// shuffleLayouts are the folder layouts of the shuffle step, in order: the
// default --shard-size, and shards of about 256 KiB.
var shuffleLayouts = []struct{ label, what string }{
	{"default", "converted with the default `--shard-size` (one shard)"},
	{"256KiB", "cut into shards of about 256 KiB"},
	{"random", "converted with the default `--shard-size` and `--order random:1` (graphs stored in a seeded random order, ids unchanged)"},
}

// writeShuffle: how well each order mixes an epoch (step shuffle).
func (pg *page) writeShuffle(w *bytes.Buffer) {
	if !section(w, "Shuffle quality (`bench/shuffle`)", "shuffle.txt", pg.shuffle) {
		return
	}
	first := pg.shuffle[0]
	fmt.Fprintf(w, "Command: %s (step `shuffle`). The real COLLAB (%s graphs, stored in class order as TU lists them); batches of 32, "+
		"five epochs. A window's blocks are pages (a shard file's record batches: at most 1,024 graphs and 4 Mi values); "+
		"`window:SIZE` is as many pages as the largest fills in SIZE, and the default under a cache limit fills about a quarter "+
		"of it. Per order: the mean number of distinct pages a batch draws from, and the mean total variation distance between "+
		"a batch's class mix and the dataset's (0: the dataset's mix; the global permutation's value is what batches of 32 drawn "+
		"uniformly give). %s\n\n", pg.command("shuffle"), fnum(num(first, "graphs")), pg.machineLine())
	for _, l := range shuffleLayouts {
		var rows []map[string]string
		for _, m := range pg.shuffle {
			if m["layout"] == l.label {
				rows = append(rows, m)
			}
		}
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(w, "COLLAB %s: %s pages, the largest about %.1f MiB decoded.\n\n", l.what, fnum(num(rows[0], "total_pages")),
			num(rows[0], "largest_page_bytes")/(1<<20))
		fmt.Fprintf(w, "| order | drawn as | pages a batch draws from | class-mix distance to the dataset |\n|---|---|---:|---:|\n")
		for _, m := range rows {
			asked := "`" + m["asked"] + "`"
			if lim, ok := strings.CutPrefix(m["asked"], "default:"); ok {
				asked = "default under `--cache-limit " + lim + "`"
			}
			fmt.Fprintf(w, "| %s | `%s` | %.1f | %.3f |\n", asked, m["order"], num(m, "pages_per_batch"), num(m, "tv"))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "A set stored sorted by class (COLLAB is) mixes only as well as the number of pages a window holds: "+
		"under a limit that holds one page a window, a batch sees one class. Smaller shards help little (their pages are "+
		"smaller, but a window by size holds as many bytes); stored in a random order (`shardconv convert --order random:SEED`) "+
		"it mixes as the global permutation does with one page a window.\n\n")
}

// shuffleGoals is issue #36's shuffle row: the class-ordered COLLAB at the
// default shard size, the default window under a 64 MiB limit, within
// 1.5× of the global shuffle's class-mix distance: converted with
// --order random:1 (the goal), and in id order beside it.
func (pg *page) shuffleGoals() []goal {
	if len(pg.shuffle) == 0 {
		return nil
	}
	glob, ok1 := rowWith(pg.shuffle, "layout", "default", "asked", "global")
	var gs []goal
	for _, l := range []struct {
		label, what string
		info        bool
	}{
		{"random", "converted with the default `--shard-size` and `--order random:1`", false},
		{"default", "converted with the default `--shard-size` in id order (as TU lists it, by class)", true},
	} {
		def, ok2 := rowWith(pg.shuffle, "layout", l.label, "asked", "default:64MiB")
		r := num(def, "tv") / num(glob, "tv")
		gs = append(gs, goal{"#36", "the class-ordered real COLLAB " + l.what + ": class-mix distance of the default window under `--cache-limit 64MiB` within 1.5× of the global shuffle's",
			fmt.Sprintf("%.1f× (%.3f with `%s` vs %.3f)", r, num(def, "tv"), def["order"], num(glob, "tv")), r <= 1.5, ok1 && ok2 && !math.IsNaN(r), l.info})
	}
	return gs
}
