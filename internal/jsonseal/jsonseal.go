// Package jsonseal checksums JSON documents in place: a document carries
// the SHA-256 of its own canonical encoding (every field but the checksum,
// compact, keys in struct order) in a "checksum" field, so an edit of any
// field — a count, a label map, a name — is caught on reading, whatever
// the whitespace. The shard manifest and the materialized-epoch manifests
// are sealed this way.
package jsonseal

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
)

// Prefix marks the checksum's algorithm.
const Prefix = "sha256:"

// ErrMismatch: a document's content does not match its checksum.
var ErrMismatch = errors.New("jsonseal: checksum mismatch")

// Sealed is a document with a checksum field.
type Sealed interface {
	// ChecksumField points to the document's checksum string.
	ChecksumField() *string
}

func sum(v Sealed) (string, error) {
	f := v.ChecksumField()
	saved := *f
	*f = ""
	b, err := json.Marshal(v)
	*f = saved
	if err != nil {
		return "", err
	}
	s := sha256.Sum256(b)
	return Prefix + hex.EncodeToString(s[:]), nil
}

// Seal sets v's checksum and returns v as indented JSON with a final
// newline.
func Seal(v Sealed) ([]byte, error) {
	s, err := sum(v)
	if err != nil {
		return nil, err
	}
	*v.ChecksumField() = s
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Check verifies v's checksum (v decoded from a sealed document).
func Check(v Sealed) error {
	want := *v.ChecksumField()
	if want == "" {
		return fmt.Errorf("%w: the document has no checksum", ErrMismatch)
	}
	got, err := sum(v)
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("%w: the content hashes to %s, the document says %s (edited or damaged)", ErrMismatch, got, want)
	}
	return nil
}
