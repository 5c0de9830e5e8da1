// Command shardconv converts TUDataset graphs into checksummed Arrow IPC
// shards, verifies them, prints their statistics, generates synthetic
// datasets and downloads published ones. The work is done by the shard,
// shard/tu, internal/convert, internal/synth and internal/download packages.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/augloader/augloader/ingest"
	"github.com/augloader/augloader/ingest/convert"
	"github.com/augloader/augloader/ingest/download"
	"github.com/augloader/augloader/ingest/synth"
	"github.com/augloader/augloader/internal/cliutil"
	"github.com/augloader/augloader/internal/version"
	"github.com/augloader/augloader/objstore"
	"github.com/augloader/augloader/shard"
)

func main() { cliutil.Main(app()) }

func app() *cli.App {
	return &cli.App{
		Name:    "shardconv",
		Usage:   "pack TUDataset graphs into checksummed Arrow IPC shards",
		Version: version.Version,
		Commands: []*cli.Command{
			convertCmd(), verifyCmd(), statsCmd(), pagemapCmd(), pruneCmd(), synthCmd(), downloadCmd(),
		},
	}
}

var convertFlags = []cli.Flag{
	&cli.StringFlag{Name: "name", Usage: "dataset name, the prefix of its files (default: the input's only dataset)"},
	&cli.StringFlag{Name: "features", Value: "auto", Usage: "node features: auto (node labels if present, else degree), labels, attributes or degree", Action: cliutil.OneOf("features", "auto", "labels", "attributes", "degree")},
	&cli.StringFlag{Name: "task", Value: "auto", Usage: "the graph labels' task: auto (one integer label a graph beyond 0 and 1: classes; 0, 1 or missing: binary targets; else regression, as OGB), class, binary or regression (TU and GIN labels are classes)", Action: cliutil.OneOf("task", "auto", "class", "binary", "regression")},
	&cli.StringFlag{Name: "compression", Value: "zstd", Usage: "record batch compression: zstd, lz4 or none", Action: cliutil.OneOf("compression", "zstd", "lz4", "none")},
	&cli.StringFlag{Name: "shard-size", Value: "64MiB", Usage: "target shard file size, e.g. 2MiB or 262144 (64KiB..16GiB)", Action: sizeRange("shard-size", 64<<10, 16<<30)},
	&cli.StringFlag{Name: "order", Value: "id", Usage: "how graphs are stored: id (in id order) or random:SEED (a seeded random order, ids unchanged: a set listed in class order, as TU lists COLLAB, then mixes classes within a few pages of augloader's windowed shuffle; the decoded set is held in memory until written)"},
	&cli.BoolFlag{Name: "force", Usage: "replace an existing output folder (only once the new one is complete)"},
	&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress or summary"},
	// Limits: what an input may make the converter hold (docs/format.md,
	// "Limits"); a dataset that needs more raises them.
	&cli.Int64Flag{Name: "max-graph-nodes", Value: ingest.DefaultLimits.MaxNodes, Usage: "refuse a graph of more nodes (1..2^30)", Action: cliutil.Int64Range("max-graph-nodes", 1, 1<<30)},
	&cli.Int64Flag{Name: "max-graph-edges", Value: ingest.DefaultLimits.MaxEdges, Usage: "refuse a graph listing more edges, before duplicates are dropped (1..2^31)", Action: cliutil.Int64Range("max-graph-edges", 1, 1<<31)},
	&cli.IntFlag{Name: "max-columns", Value: ingest.DefaultLimits.MaxColumns, Usage: "refuse a feature file of more columns (1..1048576)", Action: cliutil.IntRange("max-columns", 1, 1<<20)},
	&cli.StringFlag{Name: "max-pickle", Value: cliutil.FormatSize(ingest.DefaultLimits.MaxPickle), Usage: "refuse an OGB split_dict.pt whose pickle is larger (1KiB..16GiB)", Action: sizeRange("max-pickle", 1<<10, 16<<30)},
	&cli.Int64Flag{Name: "max-expansion", Value: ingest.DefaultExpansion.Ratio, Usage: "refuse input whose compressed parts inflate, together, to more than this many times its size on disk, beyond the first 8MiB (1..1000000)", Action: cliutil.Int64Range("max-expansion", 1, 1_000_000)},
	// Structures (an extended XYZ file, an ASE database): the neighbour
	// list stored, and the labels' keys as MACE names them.
	&cli.Float64Flag{Name: "cutoff", Value: convert.DefaultCutoff, Usage: "structures: the stored neighbour list's cutoff in Å (a model may serve any cutoff up to it; 0.1..100)", Action: cliutil.Float64Range("cutoff", 0.1, 100)},
	&cli.StringFlag{Name: "neighbours", Value: "ase", Usage: "structures: the neighbour list's convention: ase (ASE, matscipy, vesin and MACE: d < cutoff, coincident atoms kept) or fairchem (d <= cutoff, d >= 1e-8, --max-neighbors)", Action: cliutil.OneOf("neighbours", "ase", "fairchem")},
	&cli.IntFlag{Name: "max-neighbors", Usage: "structures, --neighbours fairchem: keep each atom's nearest N (and those within 0.01 Å of the (N+1)-th's distance, as fairchem's max_neighbors; 0: no cap)", Action: cliutil.IntRange("max-neighbors", 0, 1<<20)},
	&cli.BoolFlag{Name: "strict-max-neighbors", Usage: "structures: --max-neighbors keeps exactly N (ties by index and shift), as fairchem's enforce_max_neighbors_strictly"},
	&cli.StringFlag{Name: "energy-key", Value: "energy", Usage: "structures: the key holding the energy (eV), stored as energy (MACE's --energy_key)"},
	&cli.StringFlag{Name: "forces-key", Value: "forces", Usage: "structures: the per-atom key holding the forces (eV/Å), stored as forces"},
	&cli.StringFlag{Name: "stress-key", Value: "stress", Usage: "structures: the key holding the stress (eV/Å³, 3×3), stored as stress"},
	&cli.StringFlag{Name: "virials-key", Value: "virials", Usage: "structures: the key holding the virials (eV, 3×3), stored as virials"},
	&cli.StringFlag{Name: "charge-key", Value: "charge", Usage: "structures: the key holding the total charge, stored as charge"},
	&cli.StringFlag{Name: "spin-key", Value: "spin", Usage: "structures: the key holding the spin, stored as spin"},
}

// maxSynthGraphs bounds synth --graphs: 27 times PCQM4Mv2 (3.7 million
// graphs), past which the generator's per-graph tables alone would take
// gigabytes (--graphs 1000000000000 died of out-of-memory).
const maxSynthGraphs = 100_000_000

// sizeRange is a StringFlag Action refusing a size that ParseSize cannot
// read or that lies outside [lo, hi].
func sizeRange(name string, lo, hi int64) func(*cli.Context, string) error {
	return func(_ *cli.Context, v string) error {
		n, err := cliutil.ParseSize(name, v)
		if err != nil {
			return err
		}
		if n < lo || n > hi {
			return fmt.Errorf("--%s %s: want %s..%s", name, v, cliutil.FormatSize(lo), cliutil.FormatSize(hi))
		}
		return nil
	}
}

// limits reads the limit flags.
func limits(c *cli.Context) (ingest.Limits, error) {
	pickle, err := cliutil.ParseSize("max-pickle", c.String("max-pickle"))
	if err != nil {
		return ingest.Limits{}, err
	}
	return ingest.Limits{
		MaxNodes: c.Int64("max-graph-nodes"), MaxEdges: c.Int64("max-graph-edges"), MaxColumns: c.Int("max-columns"),
		MaxPickle: pickle, Expansion: ingest.Expansion{Ratio: c.Int64("max-expansion"), Floor: ingest.DefaultExpansion.Floor},
	}, nil
}

func convertCmd() *cli.Command {
	return &cli.Command{
		Name:      "convert",
		Usage:     "convert a dataset (TU, GIN text, an OGB graph-property folder in csv.gz or npz, or a Parquet table of graphs; as a folder, .zip, .tar, .tar.gz, .tar.xz or bare file) into a shard folder",
		ArgsUsage: " ",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "input", Aliases: []string{"i"}, Required: true, Usage: "dataset: a TU folder, the GIN text format (.txt), an OGB graph-property folder (raw/*.csv.gz or raw/data.npz) or a .parquet table (edge_index, num_nodes, y, node_feat, edge_attr); a folder, .zip, .tar, .tar.gz, .tar.xz or the bare file"},
			&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Required: true, Usage: "shard folder to create, or s3://BUCKET/PREFIX (converted in a temporary folder, then uploaded, the manifest last)"},
		}, convertFlags...),
		Action: func(c *cli.Context) error {
			_, err := runConvert(c, c.String("input"), c.String("out"), "", "")
			return err
		},
	}
}

// localPath refuses a URL where a local path goes (`-i s3://b/x` once
// read a folder ./s3:/b/x).
func localPath(flag, p string) error {
	if objstore.IsRemote(p) {
		return fmt.Errorf("%s %s: a URL; convert reads datasets from local disk only (it writes to s3:// with -o)", flag, p)
	}
	return nil
}

// runConvert converts input into out; generation names the files of a
// folder bound for object storage over another (convertToStore), shown
// what the summary calls the output ("": out).
func runConvert(c *cli.Context, input, out, generation, shown string) (*convert.Result, error) {
	if shown == "" {
		shown = out
	}
	if err := localPath("--input", input); err != nil {
		return nil, err
	}
	if objstore.IsRemote(out) {
		return convertToStore(c, input, out)
	}
	feat, err := ingest.ParseFeatureMode(c.String("features"))
	if err != nil {
		return nil, err
	}
	comp, err := shard.ParseCompression(c.String("compression"))
	if err != nil {
		return nil, err
	}
	quiet := c.Bool("quiet")
	shardBytes, err := cliutil.ParseSize("shard-size", c.String("shard-size"))
	if err != nil {
		return nil, err
	}
	lim, err := limits(c)
	if err != nil {
		return nil, err
	}
	order, err := shard.ParseOrder(c.String("order"))
	if err != nil {
		return nil, fmt.Errorf("--order %q: want id or random:SEED (SEED a non-negative integer)", c.String("order"))
	}
	opts := convert.Options{
		Input: input, Out: out, Name: c.String("name"), Features: feat, Task: shard.TaskKind(c.String("task")),
		Compression: comp, ShardBytes: shardBytes, Force: c.Bool("force"), Limits: lim, Order: order,
		Generation: generation,
		Structures: convert.StructureOptions{Cutoff: c.Float64("cutoff"), Neighbours: c.String("neighbours"),
			MaxNeighbors: c.Int("max-neighbors"), Strict: c.Bool("strict-max-neighbors"),
			Keys: ingest.LabelKeys{Energy: c.String("energy-key"), Forces: c.String("forces-key"), Stress: c.String("stress-key"),
				Virials: c.String("virials-key"), Charge: c.String("charge-key"), Spin: c.String("spin-key")}},
	}
	if !quiet && isTerminal(os.Stderr) {
		opts.Progress = progressBar("converting")
	}
	res, err := convert.Run(c.Context, opts)
	if err != nil {
		if c.Context.Err() != nil {
			return nil, fmt.Errorf("stopped by a signal: nothing was written to %s", out)
		}
		return nil, err
	}
	if !quiet {
		m := res.Manifest
		secs := res.Elapsed.Seconds()
		if m.Structures != nil {
			describeStructures(m, shown, res)
			return res, nil
		}
		what := fmt.Sprintf("%d classes, features %s×%d", m.Classes, m.Features.Kind, m.Features.Dim)
		if m.Task != nil {
			what = describeV3(m)
		}
		fmt.Fprintf(os.Stderr, "%s: %d graphs, %d nodes, %d edges, %s → %d shard(s) for %s\n",
			m.Dataset, m.Stats.Graphs, m.Stats.Nodes, m.Stats.Edges, what, len(m.Shards), shown)
		fmt.Fprintf(os.Stderr, "dropped %d self-loops and %d duplicate entries; read %.1f MB in %.2fs (%.0f MB/s): %.2fs reading and canonicalising the graphs, %.2fs writing the shards after them\n",
			m.Stats.SelfLoopsDropped, m.Stats.DuplicateEdgesDropped, float64(res.InputBytes)/1e6, secs, float64(res.InputBytes)/1e6/secs,
			res.ReadElapsed.Seconds(), (res.Elapsed - res.ReadElapsed).Seconds())
	}
	return res, nil
}

// convertToStore converts into a temporary local folder, then uploads it
// to out (s3://BUCKET/PREFIX), the manifest last; an existing folder there
// is refused before converting, unless --force: the new folder then gets
// a generation of its own, so its files go up beside the old ones and
// the manifest's replacement swaps one folder for the other
// (objstore.S3.PutFolder).
func convertToStore(c *cli.Context, input, out string) (*convert.Result, error) {
	st, err := objstore.Resolve(c.Context, out)
	if err != nil {
		return nil, err
	}
	s3, ok := st.(*objstore.S3)
	if !ok {
		return nil, fmt.Errorf("--out %s: not an object store", out)
	}
	// Asked first, so that a folder already there or a store that cannot
	// be reached stops the command before a long conversion.
	exists, err := s3.Vacant(c.Context, c.Bool("force"))
	if err != nil {
		return nil, err
	}
	generation := ""
	if exists {
		generation = objstore.NewGeneration()
	}
	tmp, err := os.MkdirTemp("", "shardconv-upload-")
	if err != nil {
		return nil, err
	}
	// A second signal exits at once, past deferred calls: the copy goes
	// then too. The hook is dropped only once the copy is gone (dropped
	// first, an exit between the two left it), and it tries again while a
	// writer still adds files.
	drop := cliutil.AtExit(func() {
		for range 10 {
			if os.RemoveAll(tmp) == nil {
				return
			}
		}
	})
	defer func() {
		os.RemoveAll(tmp)
		drop()
	}()
	res, err := runConvert(c, input, filepath.Join(tmp, "shards"), generation, out+" (uploading)")
	if err != nil {
		return nil, err
	}
	quiet := c.Bool("quiet")
	err = s3.PutFolder(c.Context, filepath.Join(tmp, "shards"), c.Bool("force"), func(name string, n int64) {
		if !quiet {
			fmt.Fprintf(os.Stderr, "uploaded %s (%s) to %s\n", name, cliutil.HumanSize(n), out)
		}
	})
	if err != nil {
		if c.Context.Err() != nil {
			switch {
			case errors.Is(err, objstore.ErrSwapped):
				return nil, fmt.Errorf("stopped by a signal after the swap: %s holds the new folder with its split; the old "+
					"folder's files may still be there: `shardconv prune %s` deletes them", out, out)
			case errors.Is(err, objstore.ErrSwapUnknown):
				return nil, fmt.Errorf("stopped by a signal during the swap: %v; %s holds the old folder or the new one, each "+
					"whole with its split (`shardconv verify %s` says which: its dataset and generation); `shardconv prune %s` "+
					"deletes the other's files", err, out, out, out)
			}
			if exists {
				return nil, fmt.Errorf("stopped by a signal: %s still holds the folder that was there; the files this run put "+
					"beside it stay until `shardconv prune %s` deletes them (or run again to replace the folder)", out, out)
			}
			return nil, fmt.Errorf("stopped by a signal: %s has no manifest, so no shard folder is there; the files this run "+
				"put stay until `shardconv prune %s` deletes them (or run again to upload)", out, out)
		}
		return nil, err
	}
	if left, err := s3.Leftovers(c.Context); err == nil && len(left) > 0 && !quiet {
		var bytes int64
		for _, l := range left {
			bytes += l.Bytes
		}
		fmt.Fprintf(os.Stderr, "note: %s also holds %d files (%s) that stopped replacements left; shardconv prune %s deletes them\n",
			out, len(left), cliutil.FormatSize(bytes), out)
	}
	return res, nil
}

func verifyCmd() *cli.Command {
	return &cli.Command{
		Name:      "verify",
		Usage:     "check every shard's checksum, schema, structure and counts against the manifest",
		ArgsUsage: "DIR",
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return errors.New("verify: want exactly one shard folder")
			}
			dir := c.Args().First()
			st, err := objstore.Resolve(c.Context, dir)
			if err != nil {
				return err
			}
			man, errs := shard.VerifyStore(c.Context, st)
			for _, e := range errs {
				fmt.Fprintln(os.Stderr, "shardconv: verify:", e)
			}
			if len(errs) > 0 {
				return cli.Exit(fmt.Sprintf("shardconv: verify: %s: %d problem(s)", dir, len(errs)), 1)
			}
			fmt.Printf("%s: ok (%d shards, %d graphs, %d nodes, %d edges)\n", dir, len(man.Shards), man.Stats.Graphs, man.Stats.Nodes, man.Stats.Edges)
			return nil
		},
	}
}

// statsJSON is the stable output of `stats --json`.
type statsJSON struct {
	Dataset               string            `json:"dataset"`
	Graphs                int64             `json:"graphs"`
	Nodes                 int64             `json:"nodes"`
	Edges                 int64             `json:"edges"`
	Classes               int               `json:"classes"`
	FeatureKind           shard.FeatureKind `json:"feature_kind"`
	FeatureDim            int               `json:"feature_dim"`
	SelfLoopsDropped      int64             `json:"self_loops_dropped"`
	DuplicateEdgesDropped int64             `json:"duplicate_edges_dropped"`
	DirectedEntries       int64             `json:"directed_entries"`
	// AsymmetricEdges counts TU edges listed one way only (an oddity of
	// the file); a molecule or OGB set (format 3) lists each bond once by
	// convention and its reverse is added, so it says EdgesListedOneWay.
	AsymmetricEdges   *int64 `json:"asymmetric_edges,omitempty"`
	EdgesListedOneWay *int64 `json:"edges_listed_one_way,omitempty"`
	// Format 3: the task and the feature columns.
	Task          *shard.Task    `json:"task,omitempty"`
	NodeFeatures  *shard.Columns `json:"node_features,omitempty"`
	EdgeFeatures  *shard.Columns `json:"edge_features,omitempty"`
	IsolatedNodes int64          `json:"isolated_nodes"`
	MaxNodes      int64          `json:"max_nodes"`
	MaxEdges      int64          `json:"max_edges"`
	Shards        int            `json:"shards"`
	Bytes         int64          `json:"bytes"`
	LabelMap      []string       `json:"label_map"`
	// Order is how the graphs are stored: "id", or "random:SEED".
	Order string `json:"order"`
}

func pagemapCmd() *cli.Command {
	return &cli.Command{
		Name:      "pagemap",
		Usage:     "add a page map to a folder converted before the converter wrote one, so pages are read and checked alone",
		ArgsUsage: "DIR",
		Description: "A page map (docs/format.md, \"Page map\") says where each record batch of a shard lies and its CRC-32C: " +
			"a reader by the page (augloader serve --cache-limit, or object storage) then reads no shard whole. " +
			"Each shard is read through once and checked first; the folder is replaced only once the new one is complete, " +
			"its manifest resealed (the folder's shards_sha256 changes). A folder already mapped is left as it is.",
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return errors.New("pagemap: want exactly one shard folder")
			}
			dir := c.Args().First()
			man, mapped, err := shard.AddPageMap(c.Context, dir)
			if err != nil {
				return fmt.Errorf("pagemap: %s: %w", dir, err)
			}
			if mapped == 0 {
				fmt.Printf("%s: already mapped (%d shards)\n", dir, len(man.Shards))
				return nil
			}
			fmt.Printf("%s: mapped %d of %d shards\n", dir, mapped, len(man.Shards))
			return nil
		},
	}
}

func statsCmd() *cli.Command {
	return &cli.Command{
		Name:      "stats",
		Usage:     "print a shard folder's statistics",
		ArgsUsage: "DIR",
		Flags:     []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "one JSON object on stdout"}},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return errors.New("stats: want exactly one shard folder")
			}
			st, err := objstore.Resolve(c.Context, c.Args().First())
			if err != nil {
				return err
			}
			m, err := shard.ReadManifestStore(c.Context, st)
			if err != nil {
				return err
			}
			s := statsJSON{
				Dataset: m.Dataset, Graphs: m.Stats.Graphs, Nodes: m.Stats.Nodes, Edges: m.Stats.Edges,
				Classes: m.Classes, FeatureKind: m.Features.Kind, FeatureDim: m.Features.Dim,
				SelfLoopsDropped: m.Stats.SelfLoopsDropped, DuplicateEdgesDropped: m.Stats.DuplicateEdgesDropped,
				DirectedEntries: m.Stats.DirectedEntries, IsolatedNodes: m.Stats.IsolatedNodes,
				MaxNodes: m.Stats.MaxNodes, MaxEdges: m.Stats.MaxEdges, Shards: len(m.Shards), LabelMap: m.LabelMap,
				Task: m.Task, NodeFeatures: m.NodeFeatures, EdgeFeatures: m.EdgeFeatures, Order: m.Order,
			}
			if s.Order == "" {
				s.Order = "id"
			}
			oneWay := m.Stats.AsymmetricEdges
			if m.Task != nil {
				s.EdgesListedOneWay = &oneWay
			} else {
				s.AsymmetricEdges = &oneWay
			}
			for _, sh := range m.Shards {
				s.Bytes += sh.Bytes
			}
			if c.Bool("json") {
				enc := json.NewEncoder(os.Stdout)
				return enc.Encode(s)
			}
			fmt.Printf("dataset      %s\ngraphs       %d\nnodes        %d\n", s.Dataset, s.Graphs, s.Nodes)
			if m.Task == nil {
				fmt.Printf("edges        %d (undirected)\nclasses      %d %v\nfeatures     %s, dim %d\n",
					s.Edges, s.Classes, s.LabelMap, s.FeatureKind, s.FeatureDim)
			} else {
				// A molecule or OGB set: its task and columns, what a model
				// is built from (classes and one feature dim say nothing).
				fmt.Printf("edges        %d (undirected; %d listed one way, their reverse added as OGB's loader does)\n", s.Edges, oneWay)
				task := describeTask(m)
				if m.Task.Kind == shard.TaskClass {
					task += fmt.Sprintf(" %v", m.LabelMap)
				}
				fmt.Printf("task         %s\n", task)
				fmt.Printf("node columns %s\nedge columns %s\n", describeColumns(m.NodeFeatures), describeColumns(m.EdgeFeatures))
			}
			fmt.Printf("self-loops   %d dropped\nduplicates   %d dropped\nshards       %d, %s, graphs stored in %s order\n",
				s.SelfLoopsDropped, s.DuplicateEdgesDropped, s.Shards, cliutil.HumanSize(s.Bytes), s.Order)
			return nil
		},
	}
}

func synthCmd() *cli.Command {
	return &cli.Command{
		Name:  "synth",
		Usage: "write a seeded synthetic dataset shaped like a real one (TU text, or an OGB csv.gz or npz folder)",
		Description: "COLLAB: 5,000 dense ego-networks, 372,474 nodes, 12,286,079 edges, 3 classes.\n" +
			"REDDIT-BINARY: 2,000 sparse thread graphs, 859,254 nodes, 995,508 edges, 2 classes.\n" +
			"reddit: one graph of 232,965 nodes and 11,606,919 edges with a power-law degree tail.\n" +
			"ogbg-molpcba: an OGB graph-property folder (raw/*.csv.gz, split/scaffold) of 437,929 molecule-shaped\n" +
			"  graphs, about 26 atoms and 28 bonds each, OGB's 9 atom and 3 bond columns, 128 binary tasks, 60% missing.\n" +
			"ogbg-molhiv: the same of 41,127 graphs, one binary task, 3.5% positive.\n" +
			"ogbg-ppa: an OGB folder in the npz layout (raw/data.npz, split/species) of 158,100 graphs, about 243 nodes\n" +
			"  and 2,266 edges each, 7 float edge features, no node features, 37 classes (several GB: scale with --graphs).\n" +
			"malnet: TU text of 1,262,024 sparse graphs of about 15,378 nodes and 35,167 edges, 47 classes (use --graphs).\n" +
			"oc20: 3D structures shaped like Open Catalyst 2020's (fcc(111) and (100) metal slabs of 3-5 layers with a small\n" +
			"  adsorbate, about 50-90 atoms, periodic cells, tags, fixed subsurface, energy and forces), as extended XYZ files\n" +
			"  of 100,000 structures each (default 10,000 structures; --graphs sets it).\n" +
			"--graphs N keeps the first N graphs' shape at the same per-graph averages (a small demo set).",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "like", Required: true, Usage: "COLLAB, REDDIT-BINARY, reddit, malnet, ogbg-molpcba, ogbg-molhiv, ogbg-ppa or oc20"},
			&cli.Uint64Flag{Name: "seed", Value: 0, Usage: "generator seed; the same seed writes the same bytes"},
			&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Required: true, Usage: "folder to write the dataset's files into (created)"},
			&cli.IntFlag{Name: "graphs", Usage: "number of graphs (default: the real dataset's count; 1..100000000)", Action: cliutil.IntRange("graphs", 1, maxSynthGraphs)},
			&cli.BoolFlag{Name: "force", Usage: "replace an existing output folder"},
		},
		Action: func(c *cli.Context) error {
			t := time.Now()
			var (
				st   synth.Stats
				name string
				err  error
			)
			if strings.EqualFold(c.String("like"), "oc20") {
				n := c.Int("graphs")
				if n == 0 {
					n = 10_000
				}
				var prog func(done int)
				if isTerminal(os.Stderr) {
					bar := progressBar("synth oc20")
					prog = func(done int) { bar(done, n) }
				}
				oc, err := synth.WriteOC20(c.Context, n, c.Uint64("seed"), c.String("out"), c.Bool("force"), prog)
				if err != nil {
					return err
				}
				fmt.Fprintf(os.Stderr, "synth oc20 seed %d: %d structures, %d atoms in %d extxyz file(s) → %s (%.1fs); shardconv convert -i %s -o OUT builds their neighbour lists\n",
					c.Uint64("seed"), oc.Structures, oc.Atoms, oc.Files, c.String("out"), time.Since(t).Seconds(), c.String("out"))
				return nil
			}
			if ppa, ok := synth.LikePPA(c.String("like")); ok {
				ppa = ppa.Scaled(c.Int("graphs"))
				name = ppa.Name
				st, err = synth.WritePPA(c.Context, ppa, c.Uint64("seed"), c.String("out"), c.Bool("force"))
			} else if mol, ok := synth.LikeOGB(c.String("like")); ok {
				if n := c.Int("graphs"); n > 0 {
					mol = mol.Scaled(n)
				}
				name = mol.Name
				st, err = synth.WriteOGB(c.Context, mol, c.Uint64("seed"), c.String("out"), c.Bool("force"))
			} else {
				spec, lerr := synth.Like(c.String("like"))
				if lerr != nil {
					return fmt.Errorf("%w (or ogbg-molpcba, ogbg-molhiv, ogbg-ppa)", lerr)
				}
				if n := c.Int("graphs"); n > 0 {
					spec = spec.Scaled(n)
				}
				name = spec.Name
				st, err = synth.Write(c.Context, spec, c.Uint64("seed"), c.String("out"), c.Bool("force"))
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "synth %s seed %d: %d graphs, %d nodes, %d edges → %s (%.1fs)\n",
				name, c.Uint64("seed"), st.Graphs, st.Nodes, st.Edges, c.String("out"), time.Since(t).Seconds())
			return nil
		},
	}
}

func downloadCmd() *cli.Command {
	return &cli.Command{
		Name:      "download",
		Usage:     "fetch a TU dataset zip into a cache folder, verify it, and convert it",
		ArgsUsage: "NAME",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "shard folder to create (default: ./NAME.shards)"},
			&cli.StringFlag{Name: "cache", Value: defaultCache(), Usage: "folder keeping downloaded zips"},
			&cli.StringFlag{Name: "base-url", Value: download.DefaultBaseURL, Usage: "where NAME.zip is fetched from"},
			&cli.StringFlag{Name: "sha256", Usage: "expected SHA-256 of the zip (checked when given)"},
		}, convertFlags...),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return errors.New("download: want exactly one dataset name")
			}
			name := c.Args().First()
			log := slog.New(slog.NewTextHandler(os.Stderr, nil))
			zipPath, err := download.Fetch(c.Context, download.Options{
				Name: name, BaseURL: c.String("base-url"), Cache: c.String("cache"),
				SHA256: c.String("sha256"), Logger: log,
			})
			if err != nil {
				return err
			}
			out := c.String("out")
			if out == "" {
				out = name + ".shards"
			}
			_, err = runConvert(c, zipPath, out, "", "")
			return err
		},
	}
}

func defaultCache() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "augloader", "tu")
	}
	return filepath.Join(os.TempDir(), "augloader-tu")
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progressBar draws a one-line bar on stderr, at most ten times a second.
func progressBar(label string) func(done, total int) {
	var last time.Time
	return func(done, total int) {
		if done != total && time.Since(last) < 100*time.Millisecond {
			return
		}
		last = time.Now()
		const width = 30
		fill := width * done / max(total, 1)
		bar := make([]byte, width)
		for i := range bar {
			bar[i] = ' '
			if i < fill {
				bar[i] = '#'
			}
		}
		fmt.Fprintf(os.Stderr, "\r%s [%s] %d/%d graphs", label, bar, done, total)
		if done == total {
			fmt.Fprintln(os.Stderr)
		}
	}
}
