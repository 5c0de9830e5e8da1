package main

import (
	"bytes"
	"fmt"
	"math"
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
	litdata                           []map[string]string
	gpu, gpuFeed                      *gpuResults            // saved from a lent GPU machine (bench/results)
	results                           map[string]*gpuResults // every file of bench/results, by name
	shuffle                           []map[string]string
	large                             []map[string]string
	cliff, s3                         []map[string]string
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
	pg.writeTorchrun(w)
	pg.writeStructures(w)
	pg.writeTwins(w)
	pg.writeLitData(w)
	pg.writeShuffle(w)
	pg.writeLarge(w)
	pg.writeCliff(w)
	pg.writeS3(w)
	pg.writeBeside(w)
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

// pygPeer names the PyG the run measured against, as its Python steps
// recorded it ("PyG 2.8.1 on torch 2.9.1"), or "PyG" when unrecorded.
func (pg *page) pygPeer() string {
	if pg.py == nil || pg.py.versions == nil || pg.py.versions["torch_geometric"] == nil {
		return "PyG"
	}
	v := pg.py.versions
	return fmt.Sprintf("PyG %v on torch %v", v["torch_geometric"], strings.SplitN(fmt.Sprint(v["torch"]), "+", 2)[0])
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
		"freed id), so its fused form copies every other node's sorted list from the index (two ids a step), skipping " +
		"those four and slipping in the few new neighbours; the touched edges, which all end at one of at most five " +
		"output nodes, are kept as a row of bits per such node and a mask per other node, so nothing is sorted.\n\n")
}
