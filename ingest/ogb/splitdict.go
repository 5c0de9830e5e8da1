package ogb

// A split_dict.pt's index tensors, read out of its pickle without
// executing anything.

import (
	"archive/zip"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/augloader/augloader/ingest"
)

// readSplitDict reads a torch.save'd split dict from the zip in r.
// graphs is the dataset's graph count: no set of ids can be longer, and
// the pickle is bounded by it (pickleFor) and by maxPickle.
func readSplitDict(r io.ReaderAt, size int64, shown string, graphs, maxPickle int64) (train, valid, test []int64, err error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, nil, nil, formatErr(shown, 0, 0, "not a torch.save zip (torch ≥ 1.6 writes one): %v", err)
	}
	if err := ingest.CheckZipNames(r, zr); err != nil {
		return nil, nil, nil, formatErr(shown, 0, 0, "%v", err)
	}
	var pkl *zip.File
	for _, f := range zr.File {
		if strings.HasSuffix(f.Name, "/data.pkl") && strings.Count(f.Name, "/") == 1 {
			pkl = f
			break
		}
	}
	if pkl == nil {
		return nil, nil, nil, formatErr(shown, 0, 0, "no PREFIX/data.pkl: not a file torch.save wrote")
	}
	prefix := strings.TrimSuffix(pkl.Name, "data.pkl")
	limit := min(maxPickle, pickleFor(graphs))
	if int64(pkl.UncompressedSize64) > limit {
		why := fmt.Sprintf("more than a split of %d graphs can need (%d bytes)", graphs, limit)
		if limit == maxPickle {
			why = fmt.Sprintf("more than the limit of %d bytes (shardconv convert --max-pickle raises it)", maxPickle)
		}
		return nil, nil, nil, formatErr(shown, 0, 0, "%s: a pickle of %d bytes, %s", pkl.Name, pkl.UncompressedSize64, why)
	}
	body, err := readZipEntry(pkl, uint64(limit))
	if err != nil {
		return nil, nil, nil, formatErr(shown, 0, 0, "%s: %v", pkl.Name, err)
	}
	top, err := unpickle(body)
	if err != nil {
		return nil, nil, nil, formatErr(shown, 0, 0, "%s: %v", pkl.Name, err)
	}
	d, ok := top.(*pyDict)
	if !ok {
		return nil, nil, nil, formatErr(shown, 0, 0, "holds a %s, not a dict of train, valid and test ids", pyName(top))
	}
	sets := map[string]*[]int64{"train": &train, "valid": &valid, "test": &test}
	seen := map[string]bool{}
	for k, key := range d.keys {
		ks, _ := key.(string)
		dst := sets[ks]
		if dst == nil {
			continue
		}
		ids, err := pyInts(d.vals[k], zr, prefix, graphs)
		if err != nil {
			return nil, nil, nil, formatErr(shown, 0, 0, "%q: %v", ks, err)
		}
		*dst, seen[ks] = ids, true
	}
	for _, k := range []string{"train", "valid", "test"} {
		if !seen[k] {
			return nil, nil, nil, formatErr(shown, 0, 0, "no %q ids in the split dict", k)
		}
	}
	return train, valid, test, nil
}

func readZipEntry(f *zip.File, limit uint64) ([]byte, error) {
	if f.UncompressedSize64 > limit {
		return nil, fmt.Errorf("%d bytes (at most %d)", f.UncompressedSize64, limit)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(io.LimitReader(rc, int64(limit)))
}

func pyName(v any) string {
	switch x := v.(type) {
	case *pyCall:
		if g, ok := x.fn.(pyGlobal); ok {
			return g.module + "." + g.name + "(...)"
		}
	case nil:
		return "None"
	}
	return fmt.Sprintf("%T", v)
}

// pyInts reads ids from a NumPy array, a torch tensor or a list of ints.
func pyInts(v any, zr *zip.Reader, prefix string, graphs int64) ([]int64, error) {
	switch x := v.(type) {
	case *pyList:
		if int64(len(x.items)) > graphs {
			return nil, tooMany(int64(len(x.items)), graphs)
		}
		out := make([]int64, len(x.items))
		for i, it := range x.items {
			n, ok := it.(int64)
			if !ok {
				return nil, fmt.Errorf("item %d is a %s, not an integer", i, pyName(it))
			}
			out[i] = n
		}
		return out, nil
	case *pyCall:
		g, _ := x.fn.(pyGlobal)
		switch {
		case g.name == "_reconstruct" && strings.HasPrefix(g.module, "numpy"):
			return numpyInts(x, graphs)
		case g.module == "torch._utils" && g.name == "_rebuild_tensor_v2":
			return tensorInts(x, zr, prefix, graphs)
		}
	}
	return nil, fmt.Errorf("a %s, not a NumPy array, a tensor or a list of ids", pyName(v))
}

// numpyInts reads ndarray.__reduce__'s state: (version, shape, dtype,
// fortran, raw bytes).
func numpyInts(c *pyCall, graphs int64) ([]int64, error) {
	st, ok := c.state.(pyTuple)
	if !ok || len(st) != 5 {
		return nil, fmt.Errorf("a NumPy array without its (version, shape, dtype, order, data) state")
	}
	shape, _ := st[1].(pyTuple)
	if len(shape) > 1 {
		return nil, fmt.Errorf("an array of %d dimensions, not a vector of ids", len(shape))
	}
	dt, ok := st[2].(*pyCall)
	if !ok || len(dt.args) == 0 {
		return nil, fmt.Errorf("a NumPy array without a dtype")
	}
	code, _ := dt.args[0].(string)
	order := "<"
	if s, ok := dt.state.(pyTuple); ok && len(s) > 1 {
		order, _ = s[1].(string)
	}
	var raw []byte
	switch d := st[4].(type) {
	case []byte:
		raw = d
	case *pyCall: // protocol 2: _codecs.encode(latin-1 text, "latin1")
		g, _ := d.fn.(pyGlobal)
		s, ok := "", false
		if len(d.args) > 0 {
			s, ok = d.args[0].(string)
		}
		if g.name != "encode" || !ok {
			return nil, fmt.Errorf("array data is a %s", pyName(d))
		}
		raw = latin1(s)
	default:
		return nil, fmt.Errorf("array data is a %s (an object array?)", pyName(st[4]))
	}
	return intsFrom(raw, code, order == ">", graphs)
}

// latin1 turns text whose runes are all below 256 back into the bytes
// they stand for.
func latin1(s string) []byte {
	out := make([]byte, 0, len(s))
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		out = append(out, byte(r))
		s = s[n:]
	}
	return out
}

// tooMany refuses a set of n ids where the dataset has graphs graphs.
func tooMany(n, graphs int64) error {
	return fmt.Errorf("%d ids, more than the dataset's %d graphs", n, graphs)
}

// intsFrom reads raw as ids of type code (at most graphs of them: no set
// of ids is longer, and widening a byte array to int64 ids would
// otherwise take eight times its bytes for nothing).
func intsFrom(raw []byte, code string, bigEndian bool, graphs int64) ([]int64, error) {
	size := 0
	signed := true
	switch code {
	case "i1", "u1", "b1":
		size = 1
	case "i2", "u2":
		size = 2
	case "i4", "u4":
		size = 4
	case "i8", "u8":
		size = 8
	default:
		return nil, fmt.Errorf("ids of type %q, not integers", code)
	}
	signed = code[0] == 'i'
	if len(raw)%size != 0 {
		return nil, fmt.Errorf("%d bytes of data for %d-byte ids", len(raw), size)
	}
	if n := int64(len(raw) / size); n > graphs {
		return nil, tooMany(n, graphs)
	}
	var bo binary.ByteOrder = binary.LittleEndian
	if bigEndian {
		bo = binary.BigEndian
	}
	out := make([]int64, len(raw)/size)
	for i := range out {
		b := raw[i*size:]
		var v uint64
		switch size {
		case 1:
			v = uint64(b[0])
		case 2:
			v = uint64(bo.Uint16(b))
		case 4:
			v = uint64(bo.Uint32(b))
		default:
			v = bo.Uint64(b)
		}
		if signed && size < 8 && v&(1<<(8*size-1)) != 0 {
			v -= 1 << (8 * size)
		}
		out[i] = int64(v)
	}
	return out, nil
}

// tensorInts reads _rebuild_tensor_v2(storage, offset, size, stride, ...)
// whose storage is the persistent id ("storage", torch.XStorage, key,
// location, numel), its bytes PREFIX/data/KEY in the zip.
func tensorInts(c *pyCall, zr *zip.Reader, prefix string, graphs int64) ([]int64, error) {
	if len(c.args) < 4 {
		return nil, fmt.Errorf("a tensor without storage, offset, size and stride")
	}
	p, ok := c.args[0].(pyPersid)
	id, ok2 := p.id.(pyTuple)
	if !ok || !ok2 || len(id) < 5 {
		return nil, fmt.Errorf("a tensor whose storage is not a torch.save storage")
	}
	g, _ := id[1].(pyGlobal)
	key, _ := id[2].(string)
	offset, _ := c.args[1].(int64)
	size, _ := c.args[2].(pyTuple)
	if len(size) > 1 {
		return nil, fmt.Errorf("a tensor of %d dimensions, not a vector of ids", len(size))
	}
	var code string
	switch g.name {
	case "LongStorage":
		code = "i8"
	case "IntStorage":
		code = "i4"
	case "ShortStorage":
		code = "i2"
	case "CharStorage":
		code = "i1"
	case "ByteStorage":
		code = "u1"
	default:
		return nil, fmt.Errorf("a tensor of %s, not integers", g.name)
	}
	var f *zip.File
	for _, e := range zr.File {
		if e.Name == prefix+"data/"+key {
			f = e
		}
	}
	if f == nil {
		return nil, fmt.Errorf("storage %s/data/%s is missing", strings.TrimSuffix(prefix, "/"), key)
	}
	// The storage before it is read: no more elements than graphs.
	width := map[string]uint64{"i8": 8, "i4": 4, "i2": 2, "i1": 1, "u1": 1}[code]
	if n := f.UncompressedSize64 / width; n > uint64(graphs) {
		return nil, fmt.Errorf("storage %s holds %d ids, more than the dataset's %d graphs", f.Name, n, graphs)
	}
	raw, err := readZipEntry(f, uint64(graphs)*width)
	if err != nil {
		return nil, err
	}
	all, err := intsFrom(raw, code, false, graphs)
	if err != nil {
		return nil, err
	}
	n := int64(len(all))
	if len(size) == 1 {
		n, _ = size[0].(int64)
	}
	if offset < 0 || n < 0 || offset+n > int64(len(all)) {
		return nil, fmt.Errorf("tensor of %d ids at offset %d past its storage of %d", n, offset, len(all))
	}
	if stride, ok := c.args[3].(pyTuple); ok && len(size) == 1 && len(stride) == 1 {
		if st, _ := stride[0].(int64); st != 1 && n > 1 {
			return nil, fmt.Errorf("a strided tensor (stride %d): save a contiguous one", st)
		}
	}
	return all[offset : offset+n], nil
}
