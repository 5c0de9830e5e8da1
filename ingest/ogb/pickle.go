package ogb

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
)

// A split_dict.pt is what torch.save writes of OGB's split dict
// ({"train": ids, "valid": ids, "test": ids}, the ids NumPy arrays or
// torch tensors): a zip holding PREFIX/data.pkl, a pickle, and
// PREFIX/data/KEY, each tensor's storage. readSplitDict reads it without
// Python: a small pickle machine that builds only what such a file holds
// (dicts, tuples, lists, strings, numbers, globals named, calls recorded,
// never run) and then recognises NumPy's array reconstruction and torch's
// _rebuild_tensor_v2 in what it built.

// Pickle values.
type (
	pyGlobal struct{ module, name string }
	pyTuple  []any
	pyList   struct{ items []any }
	pyDict   struct{ keys, vals []any }
	pyMark   struct{}
	pyPersid struct{ id any }
	// pyCall is a REDUCE (fn applied to args) or NEWOBJ, with the state a
	// BUILD gave it.
	pyCall struct {
		fn    any
		args  pyTuple
		state any
	}
)

// A split's pickle is bounded by what its graphs can need: its ids are
// at most three sets of the dataset's graphs, each id at most 16 bytes of
// pickle (a LONG1, or a latin-1 escaped byte of NumPy's raw data), and a
// little structure: pickleFor(graphs) bytes, and never more than
// --max-pickle.
func pickleFor(graphs int64) int64 { return 64*graphs + 1<<20 }

// Unpickling holds at most pickleBudget(len) bytes of values (stack cells,
// containers, memo entries, strings; a value is a 16-byte interface, a
// container 48 bytes and its cells) and at most maxMarks open marks
// (nesting depth): a pickle that builds more than its bytes justify (a
// flood of NONE, MEMOIZE, TUPLE1 or BINGET opcodes) is refused. Legitimate
// split files (ids in lists, arrays or tensors) build about one cell per
// two bytes.
func pickleBudget(n int) int64 { return 32*int64(n) + 1<<20 }

const maxMarks = 1000

// unpickle runs the pickle in b and returns the value STOP leaves.
func unpickle(b []byte) (v any, err error) {
	var (
		stack  []any
		marks  []int // stack positions of the MARKs, innermost last
		memo   = map[int64]any{}
		i      int
		budget = pickleBudget(len(b))
	)
	fail := func(detail string, args ...any) (any, error) {
		return nil, fmt.Errorf("pickle byte %d: "+detail, append([]any{i}, args...)...)
	}
	// spend charges n bytes of values to the budget; tooBig is the error
	// once it is spent.
	spend := func(n int64) bool {
		budget -= n
		return budget >= 0
	}
	tooBig := func() (any, error) {
		return fail("the pickle builds more values than its %d bytes justify (a flood of opcodes?)", len(b))
	}
	// markFail is the error of an opcode whose popMark failed: the budget
	// spent on the items it would copy, or no MARK.
	markFail := func(detail string) (any, error) {
		if budget < 0 {
			return tooBig()
		}
		return fail(detail)
	}
	pop := func() (any, bool) {
		if len(stack) == 0 {
			return nil, false
		}
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		return x, true
	}
	popMark := func() ([]any, bool) {
		k := -1
		for len(marks) > 0 && k < 0 {
			k = marks[len(marks)-1]
			marks = marks[:len(marks)-1]
			if k >= len(stack) {
				k = -1
			} else if _, ok := stack[k].(pyMark); !ok {
				k = -1 // a MARK a TUPLE or REDUCE consumed
			}
		}
		if k < 0 {
			return nil, false
		}
		if !spend(48 + 16*int64(len(stack)-k-1)) {
			return nil, false
		}
		items := append([]any(nil), stack[k+1:]...)
		stack = stack[:k]
		return items, true
	}
	need := func(n int) bool { return i+n <= len(b) }
	u32 := func() int { x := int(binary.LittleEndian.Uint32(b[i:])); i += 4; return x }
	for i < len(b) {
		op := b[i]
		i++
		if !spend(16) { // every opcode pushes at most one value
			return tooBig()
		}
		// A value popped below the innermost mark invalidates it (a POP
		// or a reduce across a MARK): the marks follow the stack.
		for len(marks) > 0 && marks[len(marks)-1] >= len(stack) {
			marks = marks[:len(marks)-1]
		}
		switch op {
		case 0x80: // PROTO
			i++
		case 0x95: // FRAME
			i += 8
		case '.': // STOP
			x, ok := pop()
			if !ok {
				return fail("STOP on an empty stack")
			}
			return x, nil
		case '(':
			if len(marks) >= maxMarks {
				return fail("more than %d nested MARKs", maxMarks)
			}
			marks = append(marks, len(stack))
			stack = append(stack, pyMark{})
		case 'N':
			stack = append(stack, nil)
		case 0x88, 0x89: // NEWTRUE, NEWFALSE
			stack = append(stack, op == 0x88)
		case 'K': // BININT1
			if !need(1) {
				return fail("truncated")
			}
			stack = append(stack, int64(b[i]))
			i++
		case 'M': // BININT2
			if !need(2) {
				return fail("truncated")
			}
			stack = append(stack, int64(binary.LittleEndian.Uint16(b[i:])))
			i += 2
		case 'J': // BININT
			if !need(4) {
				return fail("truncated")
			}
			stack = append(stack, int64(int32(binary.LittleEndian.Uint32(b[i:]))))
			i += 4
		case 0x8a: // LONG1
			if !need(1) || !need(1+int(b[i])) {
				return fail("truncated")
			}
			n := int(b[i])
			if n > 8 {
				return fail("integer of %d bytes", n)
			}
			var x int64
			for k := n - 1; k >= 0; k-- {
				x = x<<8 | int64(b[i+1+k])
			}
			if n > 0 && n < 8 && b[i+n]&0x80 != 0 {
				x -= 1 << (8 * n)
			}
			stack = append(stack, x)
			i += 1 + n
		case 'G': // BINFLOAT
			if !need(8) {
				return fail("truncated")
			}
			stack = append(stack, math.Float64frombits(binary.BigEndian.Uint64(b[i:])))
			i += 8
		case 'X', 0x8c, 'B', 'C', 0x8d, 0x8e: // BINUNICODE, SHORT_BINUNICODE, BINBYTES, SHORT_BINBYTES, BINUNICODE8, BINBYTES8
			var n int
			switch op {
			case 'X', 'B':
				if !need(4) {
					return fail("truncated")
				}
				n = u32()
			case 0x8c, 'C':
				if !need(1) {
					return fail("truncated")
				}
				n = int(b[i])
				i++
			default:
				if !need(8) {
					return fail("truncated")
				}
				n64 := binary.LittleEndian.Uint64(b[i:])
				i += 8
				if n64 > uint64(len(b)) {
					return fail("string of %d bytes", n64)
				}
				n = int(n64)
			}
			if n < 0 || !need(n) {
				return fail("truncated string")
			}
			if !spend(int64(n)) {
				return tooBig()
			}
			if op == 'B' || op == 'C' || op == 0x8e {
				stack = append(stack, append([]byte(nil), b[i:i+n]...))
			} else {
				stack = append(stack, string(b[i:i+n]))
			}
			i += n
		case 'c': // GLOBAL "module\nname\n"
			j := bytes.IndexByte(b[i:], '\n')
			if j < 0 {
				return fail("truncated GLOBAL")
			}
			k := bytes.IndexByte(b[i+j+1:], '\n')
			if k < 0 {
				return fail("truncated GLOBAL")
			}
			stack = append(stack, pyGlobal{string(b[i : i+j]), string(b[i+j+1 : i+j+1+k])})
			i += j + k + 2
		case 0x93: // STACK_GLOBAL
			n, ok1 := pop()
			m, ok2 := pop()
			ns, ok3 := n.(string)
			ms, ok4 := m.(string)
			if !ok1 || !ok2 || !ok3 || !ok4 {
				return fail("STACK_GLOBAL without two names")
			}
			stack = append(stack, pyGlobal{ms, ns})
		case ')':
			stack = append(stack, pyTuple{})
		case 0x85, 0x86, 0x87: // TUPLE1..3
			n := int(op - 0x84)
			if len(stack) < n {
				return fail("TUPLE%d on a short stack", n)
			}
			if !spend(48 + 16*int64(n)) {
				return tooBig()
			}
			t := append(pyTuple(nil), stack[len(stack)-n:]...)
			stack = append(stack[:len(stack)-n], t)
		case 't':
			items, ok := popMark()
			if !ok {
				return markFail("TUPLE without MARK")
			}
			stack = append(stack, pyTuple(items))
		case ']':
			stack = append(stack, &pyList{})
		case 'l':
			items, ok := popMark()
			if !ok {
				return markFail("LIST without MARK")
			}
			stack = append(stack, &pyList{items: items})
		case '}':
			stack = append(stack, &pyDict{})
		case 'd':
			items, ok := popMark()
			if !ok || len(items)%2 != 0 {
				return markFail("DICT without MARK or with an odd count")
			}
			d := &pyDict{}
			for k := 0; k < len(items); k += 2 {
				d.keys, d.vals = append(d.keys, items[k]), append(d.vals, items[k+1])
			}
			stack = append(stack, d)
		case 'a', 'e': // APPEND, APPENDS
			var items []any
			if op == 'a' {
				x, ok := pop()
				if !ok {
					return fail("APPEND on an empty stack")
				}
				items = []any{x}
			} else if items0, ok := popMark(); ok {
				items = items0
			} else {
				return markFail("APPENDS without MARK")
			}
			if len(stack) == 0 {
				return fail("APPEND without a list")
			}
			l, ok := stack[len(stack)-1].(*pyList)
			if !ok {
				return fail("APPEND to a %T", stack[len(stack)-1])
			}
			if !spend(16 * int64(len(items))) {
				return tooBig()
			}
			l.items = append(l.items, items...)
		case 's', 'u': // SETITEM, SETITEMS
			var items []any
			if op == 's' {
				if len(stack) < 2 {
					return fail("SETITEM on a short stack")
				}
				items = append([]any(nil), stack[len(stack)-2:]...)
				stack = stack[:len(stack)-2]
			} else if items0, ok := popMark(); ok && len(items0)%2 == 0 {
				items = items0
			} else {
				return markFail("SETITEMS without MARK or with an odd count")
			}
			if len(stack) == 0 {
				return fail("SETITEM without a dict")
			}
			d, ok := stack[len(stack)-1].(*pyDict)
			if !ok {
				return fail("SETITEM on a %T", stack[len(stack)-1])
			}
			if !spend(16 * int64(len(items))) {
				return tooBig()
			}
			for k := 0; k < len(items); k += 2 {
				d.keys, d.vals = append(d.keys, items[k]), append(d.vals, items[k+1])
			}
		case 'q', 'r', 0x94: // BINPUT, LONG_BINPUT, MEMOIZE
			var k int64
			switch op {
			case 'q':
				if !need(1) {
					return fail("truncated")
				}
				k = int64(b[i])
				i++
			case 'r':
				if !need(4) {
					return fail("truncated")
				}
				k = int64(u32())
			default:
				k = int64(len(memo))
			}
			if len(stack) == 0 {
				return fail("PUT on an empty stack")
			}
			if !spend(64) {
				return tooBig()
			}
			memo[k] = stack[len(stack)-1]
		case 'h', 'j': // BINGET, LONG_BINGET
			var k int64
			if op == 'h' {
				if !need(1) {
					return fail("truncated")
				}
				k = int64(b[i])
				i++
			} else {
				if !need(4) {
					return fail("truncated")
				}
				k = int64(u32())
			}
			x, ok := memo[k]
			if !ok {
				return fail("GET of memo %d, never put", k)
			}
			stack = append(stack, x)
		case 'R', 0x81: // REDUCE, NEWOBJ
			args, ok1 := pop()
			fn, ok2 := pop()
			t, ok3 := args.(pyTuple)
			if !ok1 || !ok2 || !ok3 {
				return fail("REDUCE without a callable and an argument tuple")
			}
			stack = append(stack, &pyCall{fn: fn, args: t})
		case 'b': // BUILD
			st, ok1 := pop()
			if !ok1 || len(stack) == 0 {
				return fail("BUILD on a short stack")
			}
			switch o := stack[len(stack)-1].(type) {
			case *pyCall:
				o.state = st
			case *pyDict: // an OrderedDict's state: nothing the ids need
			default:
				return fail("BUILD on a %T", o)
			}
		case 'Q': // BINPERSID
			id, ok := pop()
			if !ok {
				return fail("BINPERSID on an empty stack")
			}
			stack = append(stack, pyPersid{id})
		case '0': // POP
			if _, ok := pop(); !ok {
				return fail("POP on an empty stack")
			}
		default:
			return fail("opcode 0x%02x is not one a split file holds", op)
		}
	}
	return fail("no STOP")
}
