package jsonseal_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/augloader/augloader/internal/jsonseal"
)

type doc struct {
	Name     string         `json:"name"`
	Counts   []int          `json:"counts"`
	Labels   map[string]int `json:"labels"`
	Checksum string         `json:"checksum"`
}

func (d *doc) ChecksumField() *string { return &d.Checksum }

// A sealed document reads back clean whatever its whitespace; any edit of
// a value fails Check.
func TestSeal(t *testing.T) {
	d := &doc{Name: "MUTAG", Counts: []int{188, 3371}, Labels: map[string]int{"-1": 0, "1": 1}}
	b, err := jsonseal.Seal(d)
	if err != nil {
		t.Fatal(err)
	}
	read := func(b []byte) *doc {
		var r doc
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		return &r
	}
	if err := jsonseal.Check(read(b)); err != nil {
		t.Fatalf("clean: %v", err)
	}
	var compact bytes.Buffer
	json.Compact(&compact, b)
	if err := jsonseal.Check(read(compact.Bytes())); err != nil {
		t.Fatalf("reformatted: %v", err)
	}
	for name, edited := range map[string][]byte{
		"count":    bytes.Replace(b, []byte("3371"), []byte("3372"), 1),
		"name":     bytes.Replace(b, []byte("MUTAG"), []byte("MUTAX"), 1),
		"label":    bytes.Replace(b, []byte(`"-1": 0`), []byte(`"-1": 1`), 1),
		"checksum": bytes.Replace(b, []byte("sha256:"), []byte("sha256:0"), 1),
	} {
		if err := jsonseal.Check(read(edited)); !errors.Is(err, jsonseal.ErrMismatch) {
			t.Errorf("%s edited: %v", name, err)
		}
	}
	d.Checksum = ""
	if err := jsonseal.Check(d); !errors.Is(err, jsonseal.ErrMismatch) {
		t.Errorf("no checksum: %v", err)
	}
}
