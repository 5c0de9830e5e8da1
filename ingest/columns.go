package ingest

import (
	"strconv"

	"github.com/augloader/augloader/shard"
)

// Columns is what a reader knows of a feature file or column while it
// reads: whether the dataset has it, its fields a row, whether they are a
// float block or categorical codes, and the code width guessed so far
// (widened by a reread, ErrReread).
type Columns struct {
	Present bool
	Width   int  // fields a row
	Floats  bool // a float block, not codes
	Code    int  // code width in bytes (1, 2, 4)
}

// Layout is the manifest's description of the columns (nil when the
// dataset has none): categorical columns named PREFIX_0, PREFIX_1, …, or
// a float block.
func (c *Columns) Layout(prefix string) *shard.Columns {
	if !c.Present {
		return nil
	}
	if c.Floats {
		return &shard.Columns{Dense: c.Width}
	}
	cols := make([]shard.Column, c.Width)
	for i := range cols {
		cols[i] = shard.Column{Name: prefix + "_" + strconv.Itoa(i)}
	}
	return &shard.Columns{Categorical: cols, Width: c.Code}
}

// Split is the codes and floats a row holds (one of them Width, the other 0).
func (c *Columns) Split() (nCodes, nX int) {
	if c.Floats {
		return 0, c.Width
	}
	return c.Width, 0
}
