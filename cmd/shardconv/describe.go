package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/augloader/augloader/ingest/convert"
	"github.com/augloader/augloader/shard"
)

// How convert's summary describes what it wrote.

// describeV3 says a format 3 set's task and feature columns: "binary
// targets ×128 (41% missing), node columns 9 (1 byte), edge columns 3".
func describeV3(m *shard.Manifest) string {
	parts := []string{describeTask(m)}
	for _, c := range []struct {
		what string
		cols *shard.Columns
	}{{"node", m.NodeFeatures}, {"edge", m.EdgeFeatures}} {
		switch {
		case c.cols == nil:
			parts = append(parts, "no "+c.what+" features")
		case c.cols.Cols() > 0 && c.cols.Dense > 0:
			parts = append(parts, fmt.Sprintf("%s columns %d (%d-byte codes) + %d floats", c.what, c.cols.Cols(), c.cols.Width, c.cols.Dense))
		case c.cols.Cols() > 0:
			parts = append(parts, fmt.Sprintf("%s columns %d (%d-byte codes)", c.what, c.cols.Cols(), c.cols.Width))
		default:
			parts = append(parts, fmt.Sprintf("%s floats ×%d", c.what, c.cols.Dense))
		}
	}
	return strings.Join(parts, ", ")
}

// describeTask says a format 3 set's task: "2 classes", "binary targets
// ×128 (41% missing)", "regression targets ×1".
func describeTask(m *shard.Manifest) string {
	if m.Task.Kind == shard.TaskClass {
		return fmt.Sprintf("%d classes", m.Classes)
	}
	missing := ""
	if n := m.Stats.Graphs * int64(m.Task.Targets); m.Task.Missing > 0 && n > 0 {
		missing = fmt.Sprintf(" (%.0f%% missing)", 100*float64(m.Task.Missing)/float64(n))
	}
	return fmt.Sprintf("%s targets ×%d%s", m.Task.Kind, m.Task.Targets, missing)
}

// describeColumns lists a format 3 set's node or edge columns with their
// vocabularies: "9 categorical (1-byte codes): atomic_num 119, …; 3 floats".
func describeColumns(c *shard.Columns) string {
	if c == nil {
		return "none"
	}
	var parts []string
	if n := c.Cols(); n > 0 {
		cols := make([]string, n)
		for i, col := range c.Categorical {
			cols[i] = fmt.Sprintf("%s %d", col.Name, col.Vocab)
		}
		parts = append(parts, fmt.Sprintf("%d categorical (%d-byte codes; name and vocabulary): %s", n, c.Width, strings.Join(cols, ", ")))
	}
	if c.Dense > 0 {
		parts = append(parts, fmt.Sprintf("%d floats", c.Dense))
	}
	return strings.Join(parts, "; ")
}

// describeStructures prints a format 4 set's summary: structures, atoms,
// neighbour pairs, the cutoff and convention, the properties with the
// structures that lack each.
func describeStructures(m *shard.Manifest, shown string, res *convert.Result) {
	s := m.Structures
	var props []string
	for _, p := range s.Properties {
		props = append(props, fmt.Sprintf("%s (%d missing)", p.Name, p.Missing))
	}
	secs := res.Elapsed.Seconds()
	fmt.Fprintf(os.Stderr, "%s: %d structures, %d atoms, %d neighbour pairs at %g Å (%s), %d elements, properties %s → %d shard(s) for %s\n",
		m.Dataset, m.Stats.Graphs, m.Stats.Nodes, m.Stats.Edges, s.Cutoff, s.Neighbours, len(s.Elements), strings.Join(props, ", "), len(m.Shards), shown)
	fmt.Fprintf(os.Stderr, "read %.1f MB in %.2fs (%.0f structures/s)\n", float64(res.InputBytes)/1e6, secs, float64(m.Stats.Graphs)/secs)
}
