package main

import (
	"reflect"
	"testing"

	"github.com/augloader/augloader/wire"
)

// fetch --resume W:G0,G1,…: a phase, or an error naming what is wrong.
func TestParseResumePhase(t *testing.T) {
	for _, c := range []struct {
		in   string
		want *wire.ResumePhase
	}{
		{"2:10,11", &wire.ResumePhase{World: 2, Graphs: []int{10, 11}}},
		{"1:0", &wire.ResumePhase{World: 1, Graphs: []int{0}}},
		{"2:10", nil},
		{"0:", nil},
		{"2:1,-1", nil},
		{"x:1", nil},
		{"3", nil},
	} {
		got, err := parseResumePhase(c.in)
		if c.want == nil {
			if err == nil {
				t.Errorf("%q: accepted %+v", c.in, got)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, *c.want) {
			t.Errorf("%q: %+v, %v; want %+v", c.in, got, err, *c.want)
		}
	}
}
