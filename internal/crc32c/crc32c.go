// Package crc32c is the one CRC-32C (Castagnoli) the project computes: the
// shard files' and pages' checksums in the manifest, the sizes file's
// trailer and the disk cache's entries all use it, so one table serves
// them all.
package crc32c

import (
	"hash"
	"hash/crc32"
)

var table = crc32.MakeTable(crc32.Castagnoli)

// Checksum is the CRC-32C of b.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, table) }

// Update is the CRC-32C of the bytes crc covered followed by b.
func Update(crc uint32, b []byte) uint32 { return crc32.Update(crc, table, b) }

// New is a running CRC-32C, for writers.
func New() hash.Hash32 { return crc32.New(table) }
