// Package iox holds the small io pieces several packages need: counting
// and hashing writers and readers, and crash-safe output (WriteFileAtomic,
// AtomicFile, TempDir): every file or folder augloader writes for a user
// goes through them, so nothing partial ever looks complete and nothing
// the user had is lost.
package iox

import (
	"hash"
	"io"
)

// CountingWriter counts the bytes written through it, hashing them too
// when Hash is set.
type CountingWriter struct {
	W    io.Writer
	N    int64
	Hash hash.Hash
}

func (c *CountingWriter) Write(p []byte) (int, error) {
	n, err := c.W.Write(p)
	c.N += int64(n)
	if c.Hash != nil {
		c.Hash.Write(p[:n])
	}
	return n, err
}

// CountingReader counts the bytes read through it.
type CountingReader struct {
	R io.Reader
	N int64
}

func (c *CountingReader) Read(p []byte) (int, error) {
	n, err := c.R.Read(p)
	c.N += int64(n)
	return n, err
}
