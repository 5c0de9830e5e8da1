package archtest

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const mod = "github.com/augloader/augloader"

// allowed names, for every package of the module, the packages of the
// module its non-test code may import; a package missing here fails
// TestLayering until it is given its line. The house has three floors:
//
//   - the ground: internal/ helpers (crash-safe files, Arrow and IPC
//     framing, sealed JSON, flags, the version), importing none of ours;
//   - the library: aug, epoch, shard, wire at the bottom; loader above
//     them; materialize and server on top; client beside, on wire alone;
//     ingest and its readers beside shard, writing through it;
//   - the top: app (settings to views and loaders), the commands, the
//     benchmarks, and internal/testkit (fixtures and the repository's own
//     tests), which only tests import.
var allowed = map[string][]string{
	// Ground floor.
	"internal/arrowx":   {},
	"internal/bytesize": {},
	"internal/crc32c":   {},
	"internal/cliutil":  {"internal/bytesize"},
	"internal/iox":      {},
	"internal/ipcframe": {},
	"internal/jsonseal": {},
	"internal/ordered":  {},
	"internal/version":  {},

	// Library.
	"aug": {},
	// The structure kind: neighbour lists, rotations, the elements.
	"atoms": {},
	"epoch": {"aug", "internal/bytesize", "internal/iox"},
	"shard": {"internal/arrowx", "internal/crc32c", "internal/iox", "internal/jsonseal", "internal/version", "shard/internal/pagecache"},
	// The page cache knows pages only through its Source interface.
	"shard/internal/pagecache": {},
	"wire":                     {"internal/arrowx", "internal/ipcframe"},
	"loader":                   {"atoms", "aug", "epoch", "shard", "wire", "internal/arrowx"},
	"materialize":              {"loader", "wire", "internal/iox", "internal/jsonseal", "internal/version"},
	"server":                   {"epoch", "loader", "materialize", "wire", "internal/iox", "internal/ipcframe"},
	"client":                   {"wire", "internal/ipcframe"},

	// Inputs: the seam, its readers (each one package), conversion.
	"ingest":               {"shard", "internal/iox"},
	"ingest/internal/text": {"ingest"},
	"ingest/tu":            {"ingest", "ingest/internal/text", "shard"},
	"ingest/gin":           {"ingest", "ingest/internal/text", "shard"},
	"ingest/ogb":           {"ingest", "ingest/internal/text", "shard"},
	"ingest/parquet":       {"ingest", "shard", "internal/arrowx"},
	"ingest/extxyz":        {"atoms", "ingest", "shard", "internal/iox", "internal/ordered"},
	"ingest/asedb":         {"atoms", "ingest", "shard", "internal/iox"},
	// convert writes an input's splits as epoch's split files.
	// Structures get their neighbour lists (atoms) at conversion.
	"ingest/convert":  {"atoms", "epoch", "ingest", "ingest/tu", "ingest/gin", "ingest/ogb", "ingest/parquet", "ingest/extxyz", "ingest/asedb", "shard", "internal/ordered"},
	"ingest/synth":    {"internal/iox"},
	"ingest/download": {"internal/iox"},
	// Object storage: a shard.Store of its own beside the readers.
	"objstore": {"shard", "internal/crc32c"},

	// Top floor.
	"app":                          {"epoch", "loader", "objstore", "shard", "wire", "internal/bytesize", "internal/iox"},
	"cmd/augloader":                {"app", "client", "epoch", "loader", "materialize", "objstore", "server", "shard", "wire", "internal/"},
	"cmd/shardconv":                {"ingest", "ingest/", "objstore", "shard", "internal/"},
	"bench":                        {"*"},
	"bench/shuffle":                {"app", "epoch", "shard", "internal/bytesize"},
	"bench/latencyproxy":           {},
	"internal/testkit/fixture":     {"epoch", "ingest/convert", "ingest/synth", "internal/testkit/testutil", "loader", "shard", "wire"},
	"internal/testkit/testutil":    {"aug"},
	"internal/testkit/s3test":      {"internal/testkit/testutil", "objstore"},
	"internal/testkit":             {},
	"internal/testkit/archtest":    {},
	"internal/testkit/docstest":    {},
	"internal/testkit/testsummary": {},
}

type pkg struct {
	ImportPath, Dir           string
	Imports, Deps             []string
	TestImports, XTestImports []string
	TestGoFiles, XTestGoFiles []string
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", mod+"/...").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var pkgs []pkg
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func rel(path string) string { return strings.TrimPrefix(strings.TrimPrefix(path, mod), "/") }

// ok reports whether rules allow importing dep: a package named, or every
// package under a folder named with a trailing "/", or "*".
func ok(rules []string, dep string) bool {
	return slices.ContainsFunc(rules, func(r string) bool {
		return r == "*" || r == dep || (strings.HasSuffix(r, "/") && strings.HasPrefix(dep, r))
	})
}

func TestLayering(t *testing.T) {
	for _, p := range listPackages(t) {
		name := rel(p.ImportPath)
		rules, known := allowed[name]
		if !known {
			t.Errorf("%s has no line in archtest's allowed table: add one naming what it may import", name)
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, mod+"/") {
				continue
			}
			if dep := rel(imp); !ok(rules, dep) {
				t.Errorf("%s imports %s: not allowed by the layering (internal/ helpers at the bottom; aug, epoch, shard, wire; loader; materialize, server; ingest beside shard; app, cmd, bench and testkit on top)", name, dep)
			}
		}
	}
}

// Only tests import the test kit (fixtures, the repository's checks).
func TestTestkitOnlyInTests(t *testing.T) {
	for _, p := range listPackages(t) {
		name := rel(p.ImportPath)
		if strings.HasPrefix(name, "internal/testkit/") {
			continue
		}
		for _, imp := range p.Imports {
			if strings.HasPrefix(rel(imp), "internal/testkit/") {
				t.Errorf("%s imports %s outside its tests", name, rel(imp))
			}
		}
	}
}

// A package whose tests build fixtures removes them when its tests end:
// fixture.Main as its TestMain, or a TestMain calling fixture.Cleanup.
// Without it each run of go test left a folder of shards in $TMPDIR (19
// augloader-fixture-* were found after a day of runs).
func TestFixturesRemoved(t *testing.T) {
	const fixture = mod + "/internal/testkit/fixture"
	for _, p := range listPackages(t) {
		if !slices.Contains(p.TestImports, fixture) && !slices.Contains(p.XTestImports, fixture) {
			continue
		}
		found := false
		for _, f := range append(p.TestGoFiles, p.XTestGoFiles...) {
			b, err := os.ReadFile(filepath.Join(p.Dir, f))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), "func TestMain(") && (strings.Contains(string(b), "fixture.Main(m)") || strings.Contains(string(b), "fixture.Cleanup()")) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: its tests build fixtures but no TestMain removes them (func TestMain(m *testing.M) { fixture.Main(m) })", rel(p.ImportPath))
		}
	}
}

// The library pulls no plotting or other tool-only code.
func TestNoToolDependencies(t *testing.T) {
	for _, p := range listPackages(t) {
		name := rel(p.ImportPath)
		if strings.HasPrefix(name, "cmd/") || strings.HasPrefix(name, "internal/testkit/") || name == "bench" {
			continue
		}
		for _, d := range p.Deps {
			if strings.HasPrefix(d, "gonum.org/") {
				t.Errorf("%s depends on %s", name, d)
			}
		}
	}
}
