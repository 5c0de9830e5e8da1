package shard

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/augloader/augloader/internal/crc32c"
	"github.com/augloader/augloader/internal/iox"
)

// GraphSizesName is the graph-size index beside the shards
// (docs/format.md, "Graph sizes"): for every graph, in id order, its node
// count, undirected edge count and largest node degree (int32 little
// endian each, 12 bytes a graph), then a 56-byte trailer: the magic
// "AUGSIZE1", the graph count (uint64), the CRC-32C of the entries
// (uint32), 4 zero bytes, and the SHA-256 of the manifest.json it was
// written with. A daemon reads it instead of every shard to plan batches
// at start. It is optional (folders written before it have none, and
// readers that predate it ignore it) and outside the manifest, so the
// manifest and its seal are as before.
const GraphSizesName = "graph-sizes.bin"

const (
	graphSizeBytes = 12
	sizesTrailer   = 56
	sizesMagic     = "AUGSIZE1"
)

// ErrNoSizes: a folder without a graph-size index.
var ErrNoSizes = errors.New("shard: no graph-size index (a folder written before it; shardconv convert writes one)")

// GraphSizes are the per-graph sizes of a folder, indexed by graph id.
type GraphSizes struct {
	Nodes, Edges, MaxDegree []int32
}

// sizesWriter streams the graph-size index as graphs are appended.
type sizesWriter struct {
	f      *os.File
	bw     *bufio.Writer
	crc    hash.Hash32
	deg    []int32
	maxDeg int32
	rec    [graphSizeBytes]byte
}

func newSizesWriter(dir, generation string) (*sizesWriter, error) {
	f, err := os.OpenFile(filepath.Join(dir, sizesName(generation)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("shard: %w", err)
	}
	s := &sizesWriter{f: f, crc: crc32c.New()}
	s.bw = bufio.NewWriterSize(f, 64<<10)
	return s, nil
}

// measure sets s.maxDeg to g's largest node degree.
func (s *sizesWriter) measure(g *Graph) {
	n := int(g.NumNodes)
	if g.IsStructure() {
		// Directed pairs: a structure's degree is its atoms' out-degree (a
		// periodic image counts; it may exceed the atoms).
		if cap(s.deg) < n {
			s.deg = make([]int32, n, max(n, 2*cap(s.deg)))
		}
		deg := s.deg[:n]
		clear(deg)
		s.maxDeg = 0
		for k := 0; k < len(g.Edges); k += 2 {
			if v := g.Edges[k]; v >= 0 && int(v) < n {
				deg[v]++
				s.maxDeg = max(s.maxDeg, deg[v])
			}
		}
		return
	}
	if sparse(g) {
		_, s.maxDeg = endpoints(g.Edges)
		return
	}
	if cap(s.deg) < n {
		s.deg = make([]int32, n, max(n, 2*cap(s.deg)))
	}
	deg := s.deg[:n]
	clear(deg)
	s.maxDeg = 0
	for _, v := range g.Edges {
		if v >= 0 && int(v) < n {
			deg[v]++
			s.maxDeg = max(s.maxDeg, deg[v])
		}
	}
}

// add records graph g (canonical edges: each undirected edge once).
func (s *sizesWriter) add(g *Graph) error {
	s.measure(g)
	binary.LittleEndian.PutUint32(s.rec[0:], uint32(g.NumNodes))
	binary.LittleEndian.PutUint32(s.rec[4:], uint32(len(g.Edges)/2))
	binary.LittleEndian.PutUint32(s.rec[8:], uint32(s.maxDeg))
	s.crc.Write(s.rec[:])
	_, err := s.bw.Write(s.rec[:])
	return err
}

// finish writes the trailer for the manifest whose SHA-256 is manifest,
// then flushes, syncs and closes the file.
func (s *sizesWriter) finish(manifest [32]byte, graphs int64) error {
	var t [sizesTrailer]byte
	copy(t[:], sizesMagic)
	binary.LittleEndian.PutUint64(t[8:], uint64(graphs))
	binary.LittleEndian.PutUint32(t[16:], s.crc.Sum32())
	copy(t[24:], manifest[:])
	write := func() error { _, err := s.bw.Write(t[:]); return err }
	if err := iox.SyncClose(s.f, write, s.bw.Flush); err != nil {
		return fmt.Errorf("shard: %s: %w", GraphSizesName, err)
	}
	return nil
}

func (s *sizesWriter) abort() { s.f.Close() }

// GraphSizes returns the folder's graph-size index, read by Open and
// checked: its trailer names this folder's manifest, its CRC-32C holds,
// and its totals and maxima are the manifest's. ErrNoSizes when the
// folder has none. The entries are by graph id (the file holds them by
// storage position); the result is the caller's.
func (r *Reader) GraphSizes() (*GraphSizes, error) {
	gs, err := r.sizes, r.sizesErr
	if err != nil {
		return nil, located(r.store, err)
	}
	order := r.man.graphOrder()
	if order == nil {
		return &GraphSizes{Nodes: slices.Clone(gs.Nodes), Edges: slices.Clone(gs.Edges), MaxDegree: slices.Clone(gs.MaxDegree)}, nil
	}
	byID := &GraphSizes{Nodes: make([]int32, len(gs.Nodes)), Edges: make([]int32, len(gs.Edges)), MaxDegree: make([]int32, len(gs.MaxDegree))}
	for pos, id := range order.ids {
		byID.Nodes[id], byID.Edges[id], byID.MaxDegree[id] = gs.Nodes[pos], gs.Edges[pos], gs.MaxDegree[pos]
	}
	return byID, nil
}

func readGraphSizes(ctx context.Context, st Store, man *Manifest, digest string) (*GraphSizes, error) {
	name := man.GraphSizesFile()
	f, err := st.Open(ctx, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNoSizes
	}
	if err != nil {
		return nil, fmt.Errorf("shard: %w", err)
	}
	defer f.Close()
	n := man.Stats.Graphs
	want := n*graphSizeBytes + sizesTrailer
	if f.Size() != want {
		return nil, corrupt(name, "size", "%d bytes, want %d for %d graphs", f.Size(), want, n)
	}
	data := make([]byte, want)
	err = checked(ctx, f, func(rd io.ReaderAt) error {
		if _, err := rd.ReadAt(data, 0); err != nil {
			return fmt.Errorf("shard: %s: %w", name, err)
		}
		t := data[len(data)-sizesTrailer:]
		if !bytes.Equal(t[:8], []byte(sizesMagic)) || binary.LittleEndian.Uint64(t[8:]) != uint64(n) {
			return corrupt(name, "trailer", "not a graph-size index of %d graphs", n)
		}
		if got := hex.EncodeToString(t[24:56]); got != digest {
			return corrupt(name, "manifest", "written with manifest %s, the folder's is %s (a stale copy?)", got[:12], digest[:min(12, len(digest))])
		}
		if got, want := crc32c.Checksum(data[:len(data)-sizesTrailer]), binary.LittleEndian.Uint32(t[16:]); got != want {
			return corrupt(name, "checksum", "crc32c %08x, trailer says %08x", got, want)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	body := data[:len(data)-sizesTrailer]
	gs := &GraphSizes{Nodes: make([]int32, n), Edges: make([]int32, n), MaxDegree: make([]int32, n)}
	var nodes, edges, maxNodes, maxEdges int64
	for i := range n {
		rec := body[i*graphSizeBytes:]
		nn, ne, md := int32(binary.LittleEndian.Uint32(rec)), int32(binary.LittleEndian.Uint32(rec[4:])), int32(binary.LittleEndian.Uint32(rec[8:]))
		if nn < 0 || ne < 0 || md < 0 || (md > nn && man.Structures == nil) || (ne > 0) != (md > 0) {
			return nil, corrupt(name, fmt.Sprintf("graph %d", i), "%d nodes, %d edges, largest degree %d", nn, ne, md)
		}
		gs.Nodes[i], gs.Edges[i], gs.MaxDegree[i] = nn, ne, md
		nodes += int64(nn)
		edges += int64(ne)
		maxNodes, maxEdges = max(maxNodes, int64(nn)), max(maxEdges, int64(ne))
	}
	ms := man.Stats
	if nodes != ms.Nodes || edges != ms.Edges || maxNodes != ms.MaxNodes || maxEdges != ms.MaxEdges {
		return nil, corrupt(name, "counts", "%d nodes and %d edges (largest %d, %d), manifest says %d and %d (largest %d, %d)",
			nodes, edges, maxNodes, maxEdges, ms.Nodes, ms.Edges, ms.MaxNodes, ms.MaxEdges)
	}
	return gs, nil
}

// MaxDegree is g's largest node degree (what the graph-size index
// records), in memory proportional to its edges when it declares far more
// nodes than they touch.
func MaxDegree(g *Graph) int32 {
	var s sizesWriter
	s.measure(g)
	return s.maxDeg
}

// sparse reports whether g declares far more nodes than its edges touch:
// its per-node measures are then taken by sorting its edges' ends (a graph
// that declares 2^27 nodes and holds one edge would otherwise cost a
// counter per node).
func sparse(g *Graph) bool { return int(g.NumNodes) > 4*len(g.Edges)+1024 }

// endpoints returns how many distinct nodes edges touch and the largest
// degree, in memory proportional to the edges.
func endpoints(edges []int32) (distinct int64, maxDeg int32) {
	ends := slices.Clone(edges)
	slices.Sort(ends)
	for i := 0; i < len(ends); {
		j := i
		for j < len(ends) && ends[j] == ends[i] {
			j++
		}
		distinct, maxDeg, i = distinct+1, max(maxDeg, int32(j-i)), j
	}
	return distinct, maxDeg
}
