package crc32c

import (
	"hash/crc32"
	"testing"
)

// The check value of CRC-32C ("123456789" → e3069283, RFC 3720 B.4) and
// Update and New agreeing with Checksum over a split input.
func TestCastagnoli(t *testing.T) {
	in := []byte("123456789")
	if got := Checksum(in); got != 0xe3069283 {
		t.Fatalf("Checksum = %08x, want e3069283", got)
	}
	for cut := range in {
		if got := Update(Checksum(in[:cut]), in[cut:]); got != 0xe3069283 {
			t.Errorf("Update at %d = %08x", cut, got)
		}
	}
	h := New()
	h.Write(in[:4])
	h.Write(in[4:])
	if h.Sum32() != 0xe3069283 || crc32.Checksum(in, crc32.MakeTable(crc32.Castagnoli)) != 0xe3069283 {
		t.Fatalf("New = %08x", h.Sum32())
	}
}
