package testutil

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
)

// Npy is an .npy array as numpy.save writes it (format 1.0, the header
// padded to 64 bytes): descr ("<i8", "|u1", ">f4"), shape, fortran
// order, and data, its elements as given.
func Npy(descr string, shape []int, fortran bool, data []byte) []byte {
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = fmt.Sprint(d)
	}
	sh := strings.Join(dims, ", ")
	if len(shape) == 1 {
		sh += ","
	}
	order := "False"
	if fortran {
		order = "True"
	}
	hdr := fmt.Sprintf("{'descr': '%s', 'fortran_order': %s, 'shape': (%s), }", descr, order, sh)
	for (10+len(hdr)+1)%64 != 0 {
		hdr += " "
	}
	hdr += "\n"
	var b bytes.Buffer
	b.WriteString("\x93NUMPY\x01\x00")
	binary.Write(&b, binary.LittleEndian, uint16(len(hdr)))
	b.WriteString(hdr)
	b.Write(data)
	return b.Bytes()
}

// Int64s is vals little endian, an <i8 array's data.
func Int64s(vals ...int64) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, vals)
	return b.Bytes()
}
