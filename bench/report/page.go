package main

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// page is everything one run of bench/run.sh measured.
type page struct {
	cmds                              map[string]string
	machine                           machine
	policies, scaling, collate, epoch *benchFile
	py                                *pyResults
	convert                           map[string]float64
	scaleout                          []map[string]string
	molecules                         []map[string]string
	tensors                           []map[string]string
	twins                             []map[string]string
	gpu, gpuFeed                      *gpuResults            // saved from a lent GPU machine (bench/results)
	results                           map[string]*gpuResults // every file of bench/results, by name
	shuffle                           []map[string]string
	large                             []map[string]string
	largeDecoded                      string // ", about N GiB decoded" from the large step's log
	missing                           []string
	docs                              string
	wrote                             []string
}

// COLLAB's real size (TU files in ../shared/datasets; checked against the
// paper's Table 2 by TestRealDatasets).
const collabEdges = 12_286_079

func (pg *page) memcpyMBs() float64 { return pg.epoch.med("BenchmarkLimitMemcpy", "MB/s") }
func (pg *page) socketMBs() float64 { return pg.epoch.med("BenchmarkLimitUnixSocket", "MB/s") }

// machineLine is the per-figure machine and date.
func (pg *page) machineLine() string {
	m := pg.machine
	return fmt.Sprintf("Machine: %d cores, %.1f GiB, %s; %s.", m.cores, m.memGiB, m.cpu, m.date)
}

func (pg *page) command(step string) string {
	if c, ok := pg.cmds[step]; ok {
		return "`" + c + "`"
	}
	return "(step " + step + " not run)"
}

func (pg *page) write(w *bytes.Buffer) error {
	m := pg.machine
	fmt.Fprintf(w, "# Benchmarks\n\n")
	fmt.Fprintf(w, "<!-- Written by `make bench` (bench/run.sh, then bench/report): edit bench/report, not this file. -->\n\n")
	commit := m.commit
	if m.dirtyWorktree {
		commit += " with uncommitted changes"
	}
	fmt.Fprintf(w, "Every number and figure on this page comes from one run of `make bench` on %s (commit %s). "+
		"`make bench` runs bench/run.sh, which saves each step's output and its exact command under "+
		"`bench/out/`, then `go run ./bench/report` writes this page and its PNGs from them. "+
		"The machine is shared and noisy (±15%% between runs): compare the ratios within this run, and use "+
		"`benchstat` on the raw outputs for Go benchmarks.\n\n", m.date, commit)
	if len(pg.missing) > 0 {
		fmt.Fprintf(w, "Not measured in this run (output missing): %s.\n\n", strings.Join(pg.missing, ", "))
	}
	pg.writeMachine(w)
	pg.writeGoals(w)
	pg.writeConvert(w)
	pg.writePolicies(w)
	pg.writeCollate(w)
	if err := pg.writeScaling(w); err != nil {
		return err
	}
	for _, ds := range []string{"COLLAB", "REDDIT-BINARY"} {
		if err := pg.writeEpoch(w, ds); err != nil {
			return err
		}
	}
	if err := pg.writePython(w); err != nil {
		return err
	}
	pg.writeScaleOut(w)
	pg.writeMolecules(w)
	pg.writeTensors(w)
	pg.writeGPU(w)
	pg.writeTwins(w)
	pg.writeShuffle(w)
	pg.writeLarge(w)
	return nil
}

// section writes a step's heading and, when its output file was missing
// (no rows), says so; it reports whether there is anything to show.
func section(w *bytes.Buffer, title, file string, rows []map[string]string) bool {
	fmt.Fprintf(w, "## %s\n\n", title)
	if rows == nil {
		fmt.Fprintf(w, "Not measured in this run (%s missing).\n\n", file)
		return false
	}
	return true
}

// rowWith returns the first RESULT line of rows with these key=value pairs.
func rowWith(rows []map[string]string, kv ...string) (map[string]string, bool) {
	for _, m := range rows {
		ok := true
		for i := 0; i+1 < len(kv); i += 2 {
			ok = ok && m[kv[i]] == kv[i+1]
		}
		if ok {
			return m, true
		}
	}
	return nil, false
}

// writeScaleOut: wire compression and daemons (step scaleout).
func (pg *page) writeScaleOut(w *bytes.Buffer) {
	fmt.Fprintf(w, "## Several daemons and the wire (`bench/scaleout.sh`)\n\n")
	if pg.scaleout == nil {
		w.WriteString("Not run.\n\n")
		return
	}
	fmt.Fprintf(w, "Command: %s (step `scaleout`). Data: the **real** COLLAB, converted by the script; every row a fresh daemon, "+
		"its epoch 0 read first and not counted (it builds the indexes), then the median of the next epochs as `augloader fetch` "+
		"(the Go client, decoding every batch) reads them over Arrow Flight. %s\n\n", pg.command("scaleout"), pg.machineLine())
	w.WriteString("**Wire compression** (`serve --wire-compression`, Arrow IPC body compression of the Flight stream; NodeSam, " +
		"2 workers). `loopback`: client and daemon on 127.0.0.1. `1 Gbit/s`: the daemon in one network namespace, the client in " +
		"another, joined by a veth pair whose daemon end is throttled by `tc qdisc add dev … root tbf rate 1gbit burst 256kb latency 50ms` " +
		"(the script makes and removes them; root only).\n\n")
	w.WriteString("| link | compression | MB on the wire per epoch | ÷ uncompressed | median s/epoch | ÷ uncompressed |\n|---|---|---:|---:|---:|---:|\n")
	for _, link := range []string{"loopback", "1gbit"} {
		base, okBase := rowWith(pg.scaleout, "kind", "compression", "link", link, "comp", "none")
		label := map[string]string{"loopback": "loopback", "1gbit": "1 Gbit/s (tbf)"}[link]
		if m, ok := rowWith(pg.scaleout, "kind", "compression", "link", link); ok && m["skipped"] == "1" {
			fmt.Fprintf(w, "| %s | — | not measured: %s | | | |\n", label, strings.ReplaceAll(m["why"], "-", " "))
			continue
		}
		for _, comp := range []string{"none", "lz4", "zstd"} {
			m, ok := rowWith(pg.scaleout, "kind", "compression", "link", link, "comp", comp)
			if !ok {
				continue
			}
			rb, rt := "—", "—"
			if okBase {
				rb = fx(num(m, "bytes") / num(base, "bytes"))
				rt = fx(num(m, "median_s") / num(base, "median_s"))
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", label, comp, fnum(num(m, "bytes")/1e6), rb, fs(num(m, "median_s")), rt)
		}
	}
	w.WriteString("\nThe epoch's batches hold int32 edge columns whose values repeat and climb slowly, so both codecs shrink them " +
		"more than tenfold. On this machine the daemon's two cores are the limit: zstd's compression costs more time than its " +
		"smaller stream saves, lz4 costs less than gRPC moving the uncompressed bytes even on loopback, and on the throttled link the " +
		"uncompressed epoch is held to the link's rate while both codecs are not. Compression is the daemon's choice, applies to " +
		"Flight only (the Unix socket never compresses), and the client needs nothing to read it.\n\n")
	one, ok1 := rowWith(pg.scaleout, "kind", "scaling", "daemons", "1")
	two, ok2 := rowWith(pg.scaleout, "kind", "scaling", "daemons", "2")
	if m, ok := rowWith(pg.scaleout, "kind", "scaling"); ok && m["skipped"] == "1" {
		fmt.Fprintf(w, "**Scaling**: not measured (%s).\n\n", strings.ReplaceAll(m["why"], "-", " "))
		return
	}
	if !ok1 || !ok2 {
		return
	}
	same := one["sha256"] == two["sha256"]
	verdict := "**equal**"
	if !same {
		verdict = "**different** (a defect)"
	}
	fmt.Fprintf(w, "**Scaling** (SubMix p = 0.4, lz4 on the wire): one daemon pinned to core 0 (`taskset -c 0`, 1 worker), then two "+
		"daemons pinned to cores 0 and 1 (1 worker each, `--peers` naming both), the client reading the epoch from both together "+
		"(`fetch --addr A --addr B`: batch i from daemon i mod 2, in order).\n\n"+
		"| daemons | median s/epoch | best | speed-up |\n|---:|---:|---:|---:|\n| 1 | %s | %s | 1× |\n| 2 | %s | %s | %s |\n\n",
		fs(num(one, "median_s")), fs(num(one, "best_s")), fs(num(two, "median_s")), fs(num(two, "best_s")), fx(num(one, "median_s")/num(two, "median_s")))
	fmt.Fprintf(w, "The batches' digests (SHA-256 of each batch's bytes, then of those in order: `fetch --json`'s `batches_sha256`) "+
		"from one daemon and from two are %s for every epoch measured. The machine has %d cores, so the client (gRPC, lz4 "+
		"decompression, Arrow decoding) shares them with the two daemons: the speed-up is what is left of the second core, not "+
		"what two hosts give.\n\n", verdict, pg.machine.cores)
}

func (pg *page) writeMachine(w *bytes.Buffer) {
	m := pg.machine
	fmt.Fprintf(w, "## The machine and its limits\n\n")
	fmt.Fprintf(w, "| | |\n|---|---|\n")
	fmt.Fprintf(w, "| cores | %d |\n| memory | %.1f GiB |\n| CPU | %s |\n| kernel | Linux %s |\n| Go | %s |\n", m.cores, m.memGiB, m.cpu, m.kernel, m.goVersion)
	if pg.py != nil && pg.py.versions != nil {
		v := pg.py.versions
		fmt.Fprintf(w, "| Python | %v, NumPy %v, pyarrow %v, torch %v, PyG %v |\n", v["python"], v["numpy"], v["pyarrow"], v["torch"], v["torch_geometric"])
	}
	if pg.epoch != nil {
		fmt.Fprintf(w, "| memcpy | %s (`BenchmarkLimitMemcpy`: 256 MiB copies) |\n", gbs(pg.memcpyMBs()))
		fmt.Fprintf(w, "| Unix socket | %s (`BenchmarkLimitUnixSocket`: one writer, one reader, 1 MiB writes, as the daemon and client do) |\n", gbs(pg.socketMBs()))
		fmt.Fprintf(w, "\nBoth limits come from %s (step `epoch`), in the same run as the epoch benchmarks. "+
			"A served epoch's bytes divided by them give its floor: the fastest it could cross this machine.\n", pg.command("epoch"))
	}
	w.WriteString("\n")
}

// goal is one row of the goals table.
type goal struct {
	key                   string
	cases                 []measuredCase
	issue, what, measured string
	met                   bool
	known                 bool
	info                  bool // a figure shown beside a goal, not one
}

func verdict(g goal) string {
	switch {
	case g.info:
		return "—"
	case !g.known:
		return "not measured"
	case g.met:
		return "**met**"
	}
	return "**not met**"
}

// shmVsSocket compares the Python rows of policy pol over shared memory
// and over the socket, layout by layout: "views 0.180 vs 0.220 s (1.22×)".
func (pg *page) shmVsSocket(pol string) []string {
	var parts []string
	if pg.py == nil {
		return nil
	}
	for _, layout := range []string{"raw", "views", "pyg-layout"} {
		m, ok1 := pg.py.get("augloader/shm/" + pol + "/" + layout)
		s, ok2 := pg.py.get("augloader/socket/" + pol + "/" + layout)
		if ok1 && ok2 && m.Median > 0 {
			parts = append(parts, fmt.Sprintf("`%s` %s vs %s s (%s)", layout, fs(m.Median), fs(s.Median), fx(s.Median/m.Median)))
		}
	}
	return parts
}

// headline returns the #6 comparison: the paired rows when the run has
// them, else the separate ones; the peer is PyG's fastest dropout_edge
// configuration, its Config the name of that configuration's own row.
func (pg *page) headline() (ours, peer pyRow, paired, ok bool) {
	fast, okFast := pg.py.fastest("", "dropout_edge")
	if o, ok1 := pg.py.get("paired/augloader/socket/nodesam/views"); ok1 {
		if p, ok2 := pg.py.get("paired/pyg/dropout_edge/fastest"); ok2 {
			if p.Config == "" {
				p.Config = fast.Name
			}
			return o, p, true, true
		}
	}
	o, ok1 := pg.py.get("augloader/socket/nodesam/views")
	fast.Config = fast.Name
	return o, fast, false, ok1 && okFast
}

func (pg *page) writeGoals(w *bytes.Buffer) {
	fmt.Fprintf(w, "## Goals, as measured in this run\n\n| issue | goal | measured | |\n|---|---|---|---|\n")
	for _, g := range pg.goals() {
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", g.issue, g.what, g.measured, verdict(g))
	}
	w.WriteString("\n")
}

func (pg *page) writeConvert(w *bytes.Buffer) {
	fmt.Fprintf(w, "## Converting the real COLLAB (`shardconv convert`)\n\n")
	if pg.convert == nil {
		w.WriteString("Not run.\n\n")
		return
	}
	c := pg.convert
	fmt.Fprintf(w, "Command: %s (best of 5 with zstd, of 3 with lz4 and with none; page cache warm). Data: the real COLLAB from "+
		"`../shared/datasets/tu/COLLAB/COLLAB_tu.tar.xz` (derived TU text, see its PROVENANCE), %s bytes of input, "+
		"%s lines in `A.txt`; degree features (369). %s\n\n", pg.command("convert"), fnum(c["bytes"]), fnum(c["a_lines"]), pg.machineLine())
	mb := c["bytes"] / 1e6
	fmt.Fprintf(w, "| step | time | reading the graphs | writing the shards after them | input rate | ratio |\n|---|---:|---:|---:|---:|---:|\n")
	fmt.Fprintf(w, "| `wc -l COLLAB_A.txt` (the machine's line-scanning limit) | %s s | | | %s | 1× |\n", fs(c["wc_s"]), gbs(mb/c["wc_s"]))
	// row: one conversion, its total and (when the run has them) its phases.
	row := func(what, total, read, write string) {
		t, ok := c[total]
		if !ok {
			return
		}
		rd, wr := "", ""
		if r, ok := c[read]; ok {
			rd, wr = fs(r)+" s", fs(c[write])+" s"
		}
		fmt.Fprintf(w, "| %s | %s s | %s | %s | %s | %s `wc -l` |\n", what, fs(t), rd, wr, mbsStr(mb/t), fx(t/c["wc_s"]))
	}
	row("`shardconv convert` (parse, canonicalise, degree codes, zstd — the default, fsync, SHA-256 of the sources)", "convert_s", "read_s", "write_s")
	row("`shardconv convert --compression lz4`", "lz4_s", "lz4_read_s", "lz4_write_s")
	row("`shardconv convert --compression none`", "none_s", "none_read_s", "none_write_s")
	if r, ok := pg.py.get("pyg/read_tu_data"); ok {
		fmt.Fprintf(w, "| peer: PyG's `read_tu_data` on the same folder (into memory, no files written; one run) | %s s | | | %s | %s `wc -l` |\n",
			fs(r.Best), mbsStr(mb/r.Best), fx(r.Best/c["wc_s"]))
	}
	if one, ok := c["one_core_s"]; ok && one > 0 {
		fmt.Fprintf(w, "| `shardconv convert` pinned to one core (`taskset -c 0`; best of 3) | %s s | | | %s | %s `wc -l` |\n",
			fs(one), mbsStr(mb/one), fx(one/c["wc_s"]))
	}
	fmt.Fprintf(w, "\nPeak RSS of the conversion: %.0f MiB. COLLAB has degree features, whose vocabulary (the distinct degrees, 369) "+
		"is known only once every graph is read, so conversion has two phases (the split is from `shardconv convert`'s summary line, "+
		"for the fastest run of each). Phase one: one goroutine reads `A.txt` in 1 MiB blocks of whole lines and hashes it "+
		"(SHA-256, SHA-NI); each block is parsed eight bytes at a time on a goroutine of its own, several at once; another "+
		"goroutine groups the entries by graph and one more canonicalises each graph (a single pass where, as in TU files, every "+
		"edge is listed both ways in sorted order). Phase two writes the shards, compressing as many record batches at once as "+
		"there are cores (arrow-go encodes each batch; our writer lays the file out byte for byte as arrow-go's FileWriter does).",
		c["rss_kib"]/1024)
	if _, none := c["none_write_s"]; none {
		if _, split := c["read_s"]; split {
			fmt.Fprintf(w, " Compression costs %s s of phase two here (zstd's row less uncompressed's).", fs(c["write_s"]-c["none_write_s"]))
		}
	}
	// Whether more overlap could reach 12x: the CPU time against what 12x
	// wc -l leaves on these cores.
	if cpu, ok := c["cpu_s"]; ok && c["cores"] > 0 {
		budget := 12 * c["wc_s"] * c["cores"]
		fmt.Fprintf(w, " One run took %s s of CPU (user + system) on %.0f cores", fs(cpu), c["cores"])
		if one, ok := c["one_core_s"]; ok && one > 0 {
			fmt.Fprintf(w, ", and one core takes %s as long as all of them", fx(one/c["convert_s"]))
		}
		fmt.Fprintf(w, ": the conversion is bound by CPU, not by waiting. At 12× `wc -l` (%s s) these cores give at most %s s "+
			"of CPU, %.0f%% of what it uses now, so the goal needs the work itself cut, not more of it overlapped.",
			fs(12*c["wc_s"]), fs(budget), 100*budget/cpu)
	}
	w.WriteString(" A CPU profile: `go test -run XXX -bench ConvertCOLLAB -cpuprofile cpu.out ./ingest/convert`.")
	w.WriteString("\n\n")
}

func (pg *page) writePolicies(w *bytes.Buffer) {
	fmt.Fprintf(w, "## Augmentation per policy (`aug`)\n\n")
	if pg.policies == nil {
		w.WriteString("Not run.\n\n")
		return
	}
	fmt.Fprintf(w, "Command: %s. Data (synthetic, generated by the benchmark): 300 COLLAB-shaped graphs from "+
		"`synth.Generate` (COLLAB scaled to 300 graphs, seed 1; ≈ 74 nodes, ≈ 2,457 edges each), 300 MUTAG-shaped "+
		"molecules (10–28 nodes, a tree plus one or two ring closures) and 200 REDDIT-BINARY-shaped threads (REDDIT-BINARY "+
		"scaled to 200 graphs, seed 1; ≈ 430 nodes, ≈ 500 edges each). One goroutine (one core), scratch and output reused. "+
		"`+index` rows run on graphs carrying the per-graph `aug.Index` the loader caches (outputs byte-identical "+
		"with and without it, tested); `submix+index+cache` also with every root's PageRank ranking already in SubMix's "+
		"cache (`--ppr-cache`), the state a long run approaches (docs/schedule.md gives the share of draws that find "+
		"their ranking after e epochs). %s\n\n", pg.command("policies"), pg.machineLine())
	peer, hasPeer := pg.py.get("pyg/dropout_edge/transform-only")
	peerGps := math.NaN()
	if hasPeer {
		peerGps = peer.Graphs / peer.Median
		fmt.Fprintf(w, "Limit: the time memcpy takes to read the graph's edge list once (8 bytes per edge at %s). "+
			"Peer: PyG's `dropout_edge` applied to each graph of the real COLLAB in one process, no DataLoader "+
			"(%s graphs/s, median of %d passes, step `python`) — the cheapest per-graph augmentation PyG offers.\n\n",
			gbs(pg.memcpyMBs()), fnum(peerGps), peer.Epochs)
	}
	fmt.Fprintf(w, "| shape | policy | µs/draw | graphs/s (median, range over %d runs) | input edges/s | allocs/draw | time ÷ memcpy of its edges | speed ÷ PyG `dropout_edge`'s |\n|---|---|---:|---:|---:|---:|---:|---:|\n",
		pg.policies.count(pg.policies.names[0]))
	for _, name := range pg.policies.names {
		rest, ok := strings.CutPrefix(name, "BenchmarkPolicies/")
		if !ok {
			continue
		}
		shape, policy := splitKV(rest, "shape"), splitKV(rest, "policy")
		gps := pg.policies.med(name, "graphs/s")
		lo, hi := pg.policies.span(name, "graphs/s")
		eps := pg.policies.med(name, "edges/s")
		usDraw := 1e6 / gps
		edgesPerGraph := eps / gps
		memcpyUs := edgesPerGraph * 8 / pg.memcpyMBs() // bytes / (MB/s) = µs
		vsPeer := "—"
		if shape == "collab" && hasPeer {
			vsPeer = fx(gps / peerGps)
		}
		fmt.Fprintf(w, "| %s | %s | %.2f | %s (%s–%s) | %s | %.0f | %s | %s |\n", shape, policy, usDraw, fnum(gps), fnum(lo), fnum(hi),
			fsi(eps), pg.policies.med(name, "allocs/op"), fx(usDraw/memcpyUs), vsPeer)
	}
	for _, shape := range []string{"collab", "mutag", "reddit-binary"} {
		name := "BenchmarkBuildIndex/shape=" + shape
		if ns := pg.policies.med(name, "ns/op"); !math.IsNaN(ns) {
			fmt.Fprintf(w, "| %s | `BuildIndex` (one-off per graph) | %.2f | — | — | %.0f | — | — |\n", shape, ns/1e3, pg.policies.med(name, "allocs/op"))
		}
	}
	fmt.Fprintf(w, "\nNodeSam does three linear passes over the sorted edge list (neighbours of the split node; triangles through it; "+
		"one emission pass copying untouched edges in order and merging the touched ones); the index replaces the first two "+
		"by lookups, and in the loader the third is fused with collation (next section). It pays for itself after a few "+
		"draws per graph and costs up to 16 bytes per edge of memory "+
		"(`augloader serve --no-index` turns it off). SubMix's cost is two personalized-PageRank solves (conjugate gradient, "+
		"at most (2−α)/α-conditioned: about 8 iterations on COLLAB's dense graphs, 25 on REDDIT-BINARY's sparse ones) and a "+
		"partial sort of the root's component by score; every reduction of the solve adds its terms in one fixed order, so "+
		"the ranking is the same bit for bit on every machine and worker count, which also rules out reordering the sums for "+
		"speed. A cached ranking skips both: what is left is drawing the partner and mixing the edge lists. Zero allocations per draw in steady state "+
		"for every policy (`TestNodeSamZeroAlloc` asserts it for NodeSam). The PyG ratio compares a full NodeSam or SubMix "+
		"draw with PyG dropping edges, the simplest augmentation there is.\n\n")
}

func (pg *page) writeCollate(w *bytes.Buffer) {
	fmt.Fprintf(w, "## Collation (`aug.Coalesced`)\n\n")
	if pg.collate == nil {
		w.WriteString("Not run.\n\n")
		return
	}
	const (
		appendOnly = "BenchmarkCoalesce/append"
		nodesamTwo = "BenchmarkCoalesce/nodesam+append"
		nodesamOne = "BenchmarkCoalesce/nodesam-coalesced"
	)
	nsEdge := pg.collate.med(appendOnly, "ns/directed-edge")
	memNs := 8 / pg.memcpyMBs() * 1e3 // 8 bytes written per directed edge, ns
	fmt.Fprintf(w, "Command: %s. Data: one batch of 32 random COLLAB-sized graphs (74 nodes, density 0.9, seeded), "+
		"buffers reused as the loader reuses them. Each graph's edges are written in both directions, coalesced "+
		"(sorted by source, then target), batch-global: `edge_src` and `edge_dst`. %s\n\n", pg.command("collate"), pg.machineLine())
	fmt.Fprintf(w, "| | ns per directed edge (median, range) | ÷ expansion alone |\n|---|---:|---:|\n")
	for _, row := range []struct{ name, label string }{
		{appendOnly, "expansion of canonical pairs (`Coalesced.Append`: what every op's output goes through)"},
		{nodesamTwo, "NodeSam `Apply` (canonical pairs), then `Append`"},
		{nodesamOne, "NodeSam `ApplyCoalesced`: written straight into the columns from the input's index (what the loader runs)"},
	} {
		v := pg.collate.med(row.name, "ns/directed-edge")
		if v == 0 {
			continue
		}
		lo, hi := pg.collate.span(row.name, "ns/directed-edge")
		fmt.Fprintf(w, "| %s | %.2f (%.2f–%.2f) | %s |\n", row.label, v, lo, hi, fx(v/nsEdge))
	}
	fmt.Fprintf(w, "| limit: memcpy of the 8 bytes written per directed edge | %.2f | %s |\n", memNs, fx(memNs/nsEdge))
	if r, ok := pg.py.get("pyg/collate/workers=0"); ok {
		peerNs := r.Median * 1e9 / (2 * collabEdges)
		fmt.Fprintf(w, "| peer: PyG `Batch.from_data_list` through its DataLoader, real COLLAB epoch, per directed edge (step `python`) | %.2f | %s |\n",
			peerNs, fx(peerNs/nsEdge))
	}
	w.WriteString("\nThe expansion is a counting pass, a sequential fill of `edge_src` and one scattered `edge_dst` write per " +
		"direction, bound by its stores (the write position of a pair's smaller node stays in a register over its run). " +
		"NodeSam changes the edges of at most four nodes (the split node, the merged pair, the node renumbered into the " +
		"freed id), so its fused form copies every other node's sorted list from the index, skipping those four " +
		"without a branch and slipping in the few new neighbours, and sorts only the touched edges.\n\n")
}

func (pg *page) scaleSeries() (map[string][]scalePoint, []string) {
	series := map[string][]scalePoint{}
	var names []string
	for _, name := range pg.scaling.names {
		rest, ok := strings.CutPrefix(name, "BenchmarkScaling/")
		if !ok {
			continue
		}
		pol := splitKV(rest, "policy")
		if _, seen := series[pol]; !seen {
			names = append(names, pol)
		}
		series[pol] = append(series[pol], scalePoint{
			edges: pg.scaling.med(name, "edges"), ns: pg.scaling.med(name, "ns/op"), nsPerEdge: pg.scaling.med(name, "ns/edge")})
	}
	for _, n := range names {
		slices.SortFunc(series[n], func(a, b scalePoint) int { return int(a.edges - b.edges) })
	}
	return series, names
}

func (pg *page) writeScaling(w *bytes.Buffer) error {
	fmt.Fprintf(w, "## Linear scalability (NodeSam, SubMix)\n\n")
	if pg.scaling == nil {
		w.WriteString("Not run.\n\n")
		return nil
	}
	series, names := pg.scaleSeries()
	sub := fmt.Sprintf("%d cores, %.0f GiB; synthetic reddit (seed 0); %s", pg.machine.cores, pg.machine.memGiB, pg.machine.date)
	if err := plotScaling(series, names, sub, pg.fig("scaling-time.png"), pg.fig("scaling-ns-per-edge.png")); err != nil {
		return err
	}
	fmt.Fprintf(w, "Command: %s, drawn by bench/report. Data: **synthetic** Reddit-scale graph (`shardconv synth --like reddit "+
		"--seed 0`: 232,965 nodes, 11,606,919 edges, Chung–Lu power-law degrees; no copy of the real Reddit graph is at hand), "+
		"nine connected subgraphs induced by BFS prefixes from a random node, 10³ to 10⁷ edges, unindexed. SubMix's partner is a "+
		"second subgraph of the same size; its ns/edge counts both graphs' edges. %s\n\n", pg.command("scaling"), pg.machineLine())
	w.WriteString("![time per draw](scaling-time.png)\n![ns per edge](scaling-ns-per-edge.png)\n\n")
	memNs := 8 / pg.memcpyMBs() * 1e3
	peer, hasPeer := pg.py.get("pyg/dropout_edge/transform-only")
	peerNs := math.NaN()
	if hasPeer {
		peerNs = peer.Median * 1e9 / (peer.Bytes / 2) // per undirected edge
	}
	fmt.Fprintf(w, "| edges |")
	for _, n := range names {
		fmt.Fprintf(w, " %s ms | %s ns/edge | × memcpy |", n, n)
	}
	w.WriteString("\n|---:|")
	w.WriteString(strings.Repeat("---:|---:|---:|", len(names)))
	w.WriteString("\n")
	for i := range series[names[0]] {
		fmt.Fprintf(w, "| %s |", fnum(series[names[0]][i].edges))
		for _, n := range names {
			q := series[n][i]
			fmt.Fprintf(w, " %s | %.1f | %s |", fms(q.ns/1e6), q.nsPerEdge, fx(q.nsPerEdge/memNs))
		}
		w.WriteString("\n")
	}
	fmt.Fprintf(w, "\nLimit: memcpy of 8 bytes per edge, %.2f ns. ", memNs)
	if hasPeer {
		fmt.Fprintf(w, "Peer: PyG's `dropout_edge` on the real COLLAB in one process costs %.1f ns per undirected edge (step `python`); ", peerNs)
		for i, n := range names {
			pts := series[n]
			if i > 0 {
				w.WriteString("; ")
			}
			fmt.Fprintf(w, "%s's time per edge at 10⁷ edges is %s PyG's", n, fx(pts[len(pts)-1].nsPerEdge/peerNs))
		}
		w.WriteString(". ")
	}
	for _, n := range names {
		pts := series[n]
		lo, hi := math.Inf(1), 0.0
		for _, q := range pts {
			lo, hi = math.Min(lo, q.nsPerEdge), math.Max(hi, q.nsPerEdge)
		}
		fmt.Fprintf(w, "%s: largest ÷ smallest ns/edge %.2f, max ÷ min over the nine sizes %.2f. ", n, pts[len(pts)-1].nsPerEdge/pts[0].nsPerEdge, hi/lo)
	}
	w.WriteString("The small subgraphs are dense BFS balls around a hub (the 10³-edge one has 68 nodes): NodeSam's work on the edges " +
		"it touches (about twice the split node's degree) is a larger share of them, so its per-edge time falls as the subgraphs grow; " +
		"it also varies with the drawn node's neighbourhood, so expect ±30% per size between runs. From about 10⁵ edges SubMix's " +
		"personalized-PageRank vectors no longer fit in L2, while conjugate gradient's iteration count stays bounded by the system's " +
		"condition number whatever the size.\n\n")
	return nil
}

// stage names of BenchmarkXEpoch, each a prefix of the daemon's pipeline.
var epochStages = []string{"decode", "augment", "loader", "encode", "socket", "shm", "flight"}

func (pg *page) writeEpoch(w *bytes.Buffer, dataset string) error {
	fmt.Fprintf(w, "## An epoch of the real %s, stage by stage (`loader`, `server`, `client`)\n\n", dataset)
	bn := "Benchmark" + strings.ReplaceAll(dataset, "-", "") + "Epoch/"
	if pg.epoch == nil || pg.epoch.count(bn+"policy=none/workers=1/stage=decode") == 0 {
		w.WriteString("Not run.\n\n")
		return nil
	}
	e := pg.epoch
	mbEpoch := e.med(bn+"policy=none/workers=1/stage=socket", "MB/epoch")
	floor := mbEpoch / pg.socketMBs()
	memFloor := mbEpoch / pg.memcpyMBs()
	fmt.Fprintf(w, "Command: %s (step `epoch`). Data: the **real** %s from `../shared/datasets`, converted by the benchmark; "+
		"batch size 32; %s MB per epoch on the wire (both directions of every edge as int32, features, labels). %s\n\n",
		pg.command("epoch"), dataset, fnum(mbEpoch), pg.machineLine())
	fmt.Fprintf(w, "Each stage is a prefix of the daemon's pipeline, so each column adds one step to the one before: "+
		"`decode` (every graph from the shard's Arrow columns into an `aug.Graph`), `augment` (+ the policy; NodeSam, as in the "+
		"loader, writes its edges straight into the batch's coalesced edge columns, so its augmentation includes the edges' "+
		"collation), `loader` (+ collation into PyG-ready Arrow batches), `encode` (+ Arrow IPC encoding), `socket` (+ the Unix socket and the Go "+
		"client decoding every batch: the whole path), `shm` (the same socket with the shared-memory transport: each batch copied once "+
		"into the client's 32 MiB memfd ring, which the Go client decodes from), `flight` (the same over Arrow Flight on loopback TCP). "+
		"With 2 cores and 2 workers the stages overlap, so a difference is the wall time a step adds, not its CPU time. "+
		"Floor: the epoch's bytes at the raw socket bandwidth, %s s (memcpy alone: %s s).\n\n", fs(floor), fs(memFloor))
	fmt.Fprintf(w, "| policy | workers | decode | augment | loader | encode | socket | shm | flight | socket graphs/s | socket MB/s | socket ÷ floor |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	var bars []stageBar
	parts := []string{"decode", "augmentation", "collation", "IPC encoding", "socket + client decode"}
	for _, pol := range []string{"none", "nodesam", "submix"} {
		for _, wk := range []string{"1", "2"} {
			pre := bn + "policy=" + pol + "/workers=" + wk + "/stage="
			v := make([]float64, len(epochStages))
			for i, st := range epochStages {
				v[i] = e.med(pre+st, "s/epoch")
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | **%s** | %s | %s | %s | %s | %s |\n", pol, wk, fs(v[0]), fs(v[1]), fs(v[2]), fs(v[3]), fs(v[4]), fs(v[5]), fs(v[6]),
				fnum(e.med(pre+"socket", "graphs/s")), fnum(e.med(pre+"socket", "MB/s")), fx(v[4]/floor))
			bars = append(bars, stageBar{label: pol + "\n" + wk + " worker(s)", parts: []float64{v[0], v[1] - v[0], v[2] - v[1], v[3] - v[2], v[4] - v[3]}})
		}
	}
	fmt.Fprintf(w, "\nOne-off costs and the client alone (same run):\n\n| | seconds | |\n|---|---:|---|\n")
	fmt.Fprintf(w, "| open: `shard.Open` (size, CRC-32C, footer and structure of every shard) + `loader.NewSource` | %s | once per daemon start |\n", fs(e.med(bn+"stage=open", "s/epoch")))
	fmt.Fprintf(w, "| index: decode every graph and build its NodeSam index, one goroutine | %s | once, during the first NodeSam epoch |\n", fs(e.med(bn+"stage=index", "s/epoch")))
	for _, pol := range []string{"none", "nodesam", "submix"} {
		name := bn + "policy=" + pol + "/stage=client-decode"
		fmt.Fprintf(w, "| client decode: the Go client decoding a recorded %s epoch from memory | %s | %s |\n", pol, fs(e.med(name, "s/epoch")), gbs(e.med(name, "MB/s")))
	}
	prefix := ""
	if dataset != "COLLAB" {
		prefix = dataset + "/"
	}
	if r, ok := pg.py.get(prefix + "pyg/collate/workers=0"); ok {
		sock := e.med(bn+"policy=nodesam/workers=2/stage=socket", "s/epoch")
		fmt.Fprintf(w, "\nPeers in the same run (step `python`, the same graphs as PyG `Data` with one-hot degree `x`, PyG's DataLoader, batch size 32, "+
			"medians): collating the unaugmented %s in-process takes %s s per epoch", dataset, fs(r.Median))
		if d, ok := pg.py.fastest(prefix, "dropout_edge"); ok {
			fmt.Fprintf(w, ", and applying `dropout_edge` at its fastest configuration (%s) %s s", configName(d.Name), fs(d.Median))
		}
		fmt.Fprintf(w, ". The NodeSam-augmented epoch through the daemon, the socket and the Go client's decoding takes %s s with 2 workers: "+
			"%s faster than PyG's collation alone", fs(sock), fx(r.Median/sock))
		if d, ok := pg.py.fastest(prefix, "dropout_edge"); ok {
			fmt.Fprintf(w, ", %s faster than its fastest `dropout_edge` loader", fx(d.Median/sock))
		}
		w.WriteString(".\n")
	}
	png := "stages-" + strings.ReplaceAll(dataset, "-", "") + ".png"
	sub := fmt.Sprintf("%d cores, %.0f GiB; real %s; %s", pg.machine.cores, pg.machine.memGiB, dataset, pg.machine.date)
	if err := plotStages(dataset, bars, parts, floor, fmt.Sprintf("floor: %s MB at the raw socket's %s", fnum(mbEpoch), gbs(pg.socketMBs())), sub, pg.fig(png)); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n![%s stages](%s)\n\n", dataset, png)
	return nil
}

func (pg *page) writePython(w *bytes.Buffer) error {
	fmt.Fprintf(w, "## The Python client against PyG (`bench/python_client.py`)\n\n")
	if pg.py == nil {
		w.WriteString("Not run.\n\n")
		return nil
	}
	fmt.Fprintf(w, "Command: %s (step `python`; uses `.venv-bench`). Data: the **real** COLLAB, converted by the script; the daemon "+
		"(`augloader serve`, default workers = cores) and the client share the machine's %d cores. %s\n\n", pg.command("python"), pg.machine.cores, pg.machineLine())
	w.WriteString("What each row delivers per batch:\n\n" +
		"- `raw`: the epoch's bytes read and dropped, no Arrow decoding (the transport alone; over shared memory each message's " +
		"descriptor is read and the message released, its bytes in the ring never touched).\n" +
		"- Transports: `socket` (the Unix socket), `shm` (the same socket with the shared-memory transport, `unix+shm://`: " +
		"batches through a memfd ring the client maps, docs/protocol.md), `flight` (Arrow Flight on loopback TCP).\n" +
		"- `views`: the client's `Batch`: NumPy views of the Arrow buffers (int32 `edge_src`/`edge_dst`, the sparse one-hot features), " +
		"`ptr`, `batch` and the soft labels. This is what `augloader.torch.to_tensors` moves to a GPU, where `edge_index` is widened " +
		"to int64 and `x` one-hot encoded on the device (half the bytes of int64 cross the bus, and no dense `x`).\n" +
		"- `pyg-layout`: additionally the host-memory layout of a PyG `Batch`: int64 `edge_index` [2, E] and the dense one-hot `x` " +
		"[N, 369], what a CPU-only trainer consumes.\n" +
		"- `decode-only`: `views` built from a recorded NodeSam epoch held in memory (no daemon, no socket).\n" +
		"- PyG rows: the same graphs as `torch_geometric.data.Data` (one-hot degree `x`, both edge directions, as PyG users build COLLAB) " +
		"through PyG's `DataLoader` (batch size 32, shuffled): `collate` in-process with no augmentation; `dropout_edge` applying " +
		"`torch_geometric.utils.dropout_edge` per graph; `nodesam-cleanroom` and `submix-cleanroom` applying a clean-room NodeSam and " +
		"SubMix written per graph in NumPy from the paper's algorithms, as a PyG user of the paper would (`bench/peers/cleanroom.py`, " +
		"its outputs checked for the paper's properties by `bench/peers/test_cleanroom.py`; one epoch over every fifth graph per " +
		"configuration, so compare graphs/s); `transform-only` applies `dropout_edge` to every graph in one process, no DataLoader. " +
		"Every peer is measured in-process and with 1 and 2 worker processes, persistent or not (next table); the main table shows " +
		"its fastest configuration, and ratios are quoted against that.\n\n")
	sockBytes := map[string]float64{}
	for _, pol := range []string{"none", "nodesam", "submix"} {
		if r, ok := pg.py.get("augloader/socket/" + pol + "/raw"); ok {
			sockBytes[pol] = r.Bytes
		}
	}
	peer, hasPeer := pg.py.fastest("", "dropout_edge")
	fmt.Fprintf(w, "| measurement | median s/epoch | best | graphs/s (median) | ÷ socket floor | PyG `dropout_edge` at its fastest ÷ this (`paired/` rows: its paired epochs) |\n|---|---:|---:|---:|---:|---:|\n")
	var labels []string
	var secs []float64
	isPeerConfig := func(name string) bool {
		return strings.HasPrefix(name, "pyg/") && strings.Contains(name, "/workers=") && name != "pyg/collate/workers=0"
	}
	for _, r := range pg.py.rows {
		if r.Name == "pyg/read_tu_data" || strings.HasPrefix(r.Name, "REDDIT-BINARY/") || r.Epochs == 0 {
			continue
		}
		if isPeerConfig(r.Name) {
			continue // in the configurations table, below
		}
		pg.pythonRow(w, r, r.Name, sockBytes, peer, hasPeer)
		labels = append(labels, r.Name)
		secs = append(secs, r.Median)
	}
	if hasPeer {
		pg.pythonRow(w, peer, peer.Name+" (its fastest)", sockBytes, peer, hasPeer)
		labels = append(labels, peer.Name)
		secs = append(secs, peer.Median)
	}
	slices.Reverse(labels)
	slices.Reverse(secs)
	sub := fmt.Sprintf("%d cores, %.0f GiB; real COLLAB, 5,000 graphs; %s", pg.machine.cores, pg.machine.memGiB, pg.machine.date)
	if err := plotBars("COLLAB epoch to a Python process: augloader vs PyG", sub, labels, secs, pg.fig("python-COLLAB.png")); err != nil {
		return err
	}
	w.WriteString("\n![Python client vs PyG](python-COLLAB.png)\n\n")
	pg.writePeerConfigs(w)
	pg.writeDaemonCounters(w)
	if ours, hp, paired, ok := pg.headline(); ok {
		lay, _ := pg.py.get("augloader/socket/nodesam/pyg-layout")
		how := ""
		if paired {
			how = fmt.Sprintf("; the `paired/` rows, %d epochs of each alternating so both see the same machine", ours.Epochs)
		}
		fmt.Fprintf(w, "A NodeSam-augmented COLLAB epoch reaches the Python trainer in %s s (median%s), %s faster than PyG's DataLoader "+
			"applying only `dropout_edge` at its fastest configuration on this machine (%s, %s s). As PyG's host-memory layout (int64 `edge_index`, dense `x`) it "+
			"takes %s s, %s faster than that peer in its own rows. The client's own work is small (`decode-only`); the rest is the "+
			"daemon's augmentation and collation sharing the two cores with the client, and the copy through the kernel (`raw`).\n\n",
			fs(ours.Median), how, fx(hp.Median/ours.Median), configName(hp.Config), fs(hp.Median), fs(lay.Median), fx(peer.Median/lay.Median))
	}
	for _, pol := range []string{"none", "nodesam"} {
		if parts := pg.shmVsSocket(pol); len(parts) > 0 {
			fmt.Fprintf(w, "Shared memory against the socket, policy `%s` (median s per epoch, same run; the socket's time ÷ shared memory's "+
				"in brackets): %s. Over shared memory the daemon copies each batch once into the client's memfd ring and the client's "+
				"arrays are views of it; over the socket the kernel copies it twice (into the socket, out to the client's buffer).\n\n",
				pol, strings.Join(parts, "; "))
		}
	}
	for _, c := range []struct{ ours, aug, what string }{
		{"augloader/socket/nodesam/views", "nodesam-cleanroom", "NodeSam"},
		{"augloader/socket/submix/views", "submix-cleanroom", "SubMix (p = 0.4)"},
	} {
		o, ok1 := pg.py.get(c.ours)
		p, ok2 := pg.py.fastest("", c.aug)
		if !ok1 || !ok2 || o.Graphs == 0 || p.Graphs == 0 {
			continue
		}
		og, pgps := o.Graphs/o.Median, p.Graphs/p.Median
		fmt.Fprintf(w, "%s: the daemon delivers %s augmented graphs/s to the Python client; the clean-room %s inside PyG's DataLoader, "+
			"at its fastest (%s), %s graphs/s: %s.\n\n", c.what, fnum(og), c.what, configName(p.Name), fnum(pgps), fx(og/pgps))
	}
	return nil
}

// pythonRow is one row of the Python table.
func (pg *page) pythonRow(w *bytes.Buffer, r pyRow, label string, sockBytes map[string]float64, peer pyRow, hasPeer bool) {
	floorCol, peerCol, gps := "—", "—", "—"
	if strings.HasPrefix(r.Name, "augloader/") {
		pol := "nodesam"
		for _, p := range []string{"none", "submix"} {
			if strings.Contains(r.Name, "/"+p+"/") {
				pol = p
			}
		}
		if b := sockBytes[pol]; b > 0 && !strings.HasPrefix(r.Name, "augloader/decode-only") {
			floorCol = fx(r.Median / (b / 1e6 / pg.socketMBs()))
		}
	}
	if r.Graphs > 0 {
		gps = fnum(r.Graphs / r.Median)
	}
	if pp, ok := pg.py.get("paired/pyg/dropout_edge/fastest"); ok && strings.HasPrefix(r.Name, "paired/") {
		peerCol = fx(pp.Median / r.Median) // against the peer's epochs paired with these
	} else if hasPeer {
		peerCol = fx(peer.Median / r.Median)
	}
	if r.Name == "augloader/socket/nodesam/views" || r.Name == "paired/augloader/socket/nodesam/views" {
		label = "**" + label + "**"
	}
	fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", label, fs(r.Median), fs(r.Best), gps, floorCol, peerCol)
}

// writePeerConfigs: every DataLoader configuration of every PyG peer, the
// fastest in bold.
func (pg *page) writePeerConfigs(w *bytes.Buffer) {
	found := false
	for _, aug := range []string{"dropout_edge", "nodesam-cleanroom", "submix-cleanroom"} {
		_, ok := pg.py.fastest("", aug)
		found = found || ok
	}
	if !found {
		return
	}
	w.WriteString("Every PyG peer in every DataLoader configuration tried (same run; `dropout_edge` over all 5,000 graphs, the " +
		"clean-room peers over every fifth graph, one epoch a configuration; a persistent loader's first epoch, which starts " +
		"its workers, is not counted). The fastest, in bold, is the peer:\n\n")
	w.WriteString("| peer | configuration | median s/epoch | graphs | graphs/s |\n|---|---|---:|---:|---:|\n")
	for _, aug := range []string{"dropout_edge", "nodesam-cleanroom", "submix-cleanroom"} {
		best, _ := pg.py.fastest("", aug)
		for _, r := range pg.py.rows {
			if !strings.HasPrefix(r.Name, "pyg/"+aug+"/workers=") || r.Epochs == 0 {
				continue
			}
			cfg := configName(r.Name)
			if r.Name == best.Name {
				cfg = "**" + cfg + "**"
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", aug, cfg, fs(r.Median), fnum(r.Graphs), fnum(r.Graphs/r.Median))
		}
	}
	w.WriteString("\n")
}

// writeDaemonCounters shows what the daemon's /metrics endpoint said
// during the augloader rows: the numbers an operator scrapes.
func (pg *page) writeDaemonCounters(w *bytes.Buffer) {
	var rows []pyRow
	for _, r := range pg.py.rows {
		if r.Daemon != nil {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return
	}
	w.WriteString("The daemon's own view of the same epochs, read by the benchmark from `augloader serve --metrics` " +
		"(Prometheus text, before and after each row) exactly as an operator scrapes it: worker time building batches " +
		"(summed over workers; it includes time a worker is runnable but descheduled) and waiting (for the next batch " +
		"to build, or for room in the window while the client is behind), and the sender's time waiting for " +
		"the next batch to be built or handing it to the client's socket. Per epoch:\n\n")
	w.WriteString("| row | worker busy s | worker idle s | sender waited for workers s | sender waited on the client s | MB sent | batches |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		d := r.Daemon
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", r.Name, fs(d.WorkerBusy), fs(d.WorkerIdle), fs(d.WaitWorkers), fs(d.WaitClient), fnum(d.SentBytes/1e6), fnum(d.Batches))
	}
	w.WriteString("\n")
}

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
