package main

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/augloader/augloader/wire"
)

type arrowRecord = arrow.RecordBatch

// countBatch returns a batch's nodes, directed edges and policy counts.
func countBatch(rec arrow.RecordBatch) (nodes, edges int64, policies map[string]int) {
	policies = map[string]int{}
	s := rec.Schema()
	for i, f := range s.Fields() {
		switch f.Name {
		case wire.ColNumNodes:
			for _, v := range rec.Column(i).(*array.Int32).Int32Values() {
				nodes += int64(v)
			}
		case wire.ColEdgeSrc:
			edges += int64(rec.Column(i).(*array.List).ListValues().Len())
		case wire.ColPolicy:
			col := rec.Column(i).(*array.String)
			for j := 0; j < col.Len(); j++ {
				policies[col.Value(j)]++
			}
		}
	}
	return nodes, edges, policies
}
