package extxyz

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// The comment line: key=value pairs as ASE's key_val_str_to_dict reads
// them.

// kv is one key=value pair of a comment line.
type kv struct {
	key, value string
}

// splitInfo cuts a comment line into key=value pairs as ASE's
// key_val_str_to_dict does: values delimited by "", ”, {} or [],
// backslash escapes the next character, pairs separated by whitespace, a
// key without "=" is true ("T"), and "a=b=c" is key a, value "b=c".
func splitInfo(line string) []kv {
	type pair struct {
		parts []strings.Builder
	}
	closing := map[byte]byte{'"': '"', '\'': '\'', '{': '}', '[': ']'}
	var pairs []*pair
	cur := &pair{parts: make([]strings.Builder, 1)}
	pairs = append(pairs, cur)
	var delim byte
	escaped := false
	s := strings.TrimSpace(line)
	for i := 0; i < len(s); i++ {
		c := s[i]
		last := &cur.parts[len(cur.parts)-1]
		switch {
		case escaped:
			last.WriteByte(c)
			escaped = false
		case c == '\\':
			escaped = true
		case delim != 0:
			if c == delim {
				delim = 0
			} else {
				last.WriteByte(c)
			}
		case closing[c] != 0:
			delim = closing[c]
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f':
			if len(cur.parts) == 1 && cur.parts[0].Len() == 0 {
				continue
			}
			if last.Len() == 0 {
				continue
			}
			cur = &pair{parts: make([]strings.Builder, 1)}
			pairs = append(pairs, cur)
		case c == '=':
			if len(cur.parts) == 1 && cur.parts[0].Len() == 0 && len(pairs) > 1 {
				// "a =b": the value belongs to the pair before.
				pairs = pairs[:len(pairs)-1]
				cur = pairs[len(pairs)-1]
			}
			cur.parts = append(cur.parts, strings.Builder{})
		default:
			last.WriteByte(c)
		}
	}
	var out []kv
	for _, p := range pairs {
		if len(p.parts) == 1 && p.parts[0].Len() == 0 {
			continue
		}
		key := p.parts[0].String()
		value := "T"
		if len(p.parts) > 1 {
			vals := make([]string, len(p.parts)-1)
			for i := range vals {
				vals[i] = p.parts[i+1].String()
			}
			value = strings.Join(vals, "=")
		}
		out = append(out, kv{key, value})
	}
	return out
}

// valueKind is what a comment-line value holds.
type valueKind uint8

const (
	kindText valueKind = iota // a string: not stored
	kindNumber
	kindBool
)

// value is a parsed comment-line value.
type value struct {
	kind valueKind
	nums []float64 // numbers, or bools as 0 and 1
}

// parseValue reads a value as ASE does: a list of integers, else of
// floats, else of logicals (T, F, true, false, True, False, TRUE, FALSE),
// else "_JSON " and a JSON number or array of numbers, else text.
func parseValue(key, s string) value {
	if strings.ToLower(key) == "uid" {
		return value{kind: kindText}
	}
	toks := strings.FieldsFunc(s, func(r rune) bool {
		return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\v' || r == '\f'
	})
	if len(toks) > 0 {
		if nums, ok := parseNumbers(toks); ok {
			return value{kind: kindNumber, nums: nums}
		}
		if bools, ok := parseBools(toks); ok {
			return value{kind: kindBool, nums: bools}
		}
	}
	if rest, ok := strings.CutPrefix(s, "_JSON "); ok {
		var v any
		if json.Unmarshal([]byte(rest), &v) == nil {
			if nums, ok := jsonNumbers(v); ok {
				return value{kind: kindNumber, nums: nums}
			}
		}
	}
	return value{kind: kindText}
}

func parseNumbers(toks []string) ([]float64, bool) {
	out := make([]float64, len(toks))
	for i, t := range toks {
		if v, err := strconv.ParseInt(t, 10, 64); err == nil {
			out[i] = float64(v)
			continue
		}
		v, err := strconv.ParseFloat(t, 64)
		if err != nil {
			return nil, false
		}
		out[i] = v
	}
	return out, true
}

var bools = map[string]float64{"T": 1, "F": 0, "true": 1, "false": 0, "True": 1, "False": 0, "TRUE": 1, "FALSE": 0}

func parseBools(toks []string) ([]float64, bool) {
	out := make([]float64, len(toks))
	for i, t := range toks {
		v, ok := bools[t]
		if !ok {
			return nil, false
		}
		out[i] = v
	}
	return out, true
}

// jsonNumbers flattens a JSON number or (nested) array of numbers.
func jsonNumbers(v any) ([]float64, bool) {
	switch x := v.(type) {
	case float64:
		return []float64{x}, true
	case bool:
		if x {
			return []float64{1}, true
		}
		return []float64{0}, true
	case []any:
		var out []float64
		for _, e := range x {
			n, ok := jsonNumbers(e)
			if !ok {
				return nil, false
			}
			out = append(out, n...)
		}
		return out, len(out) > 0
	}
	return nil, false
}

// column is one per-atom column of a frame's Properties.
type column struct {
	name string // as in the file
	typ  byte   // R, I, L or S
	cols int
	at   int // first field of the line
}

// parseProperties reads "name:type:cols:..." as ASE's parse_properties.
func parseProperties(s string) ([]column, error) {
	f := strings.Split(s, ":")
	if len(f)%3 != 0 {
		return nil, errf("%q is not name:type:columns triples", s)
	}
	var out []column
	at := 0
	for i := 0; i < len(f); i += 3 {
		name, typ := f[i], f[i+1]
		cols, err := strconv.Atoi(f[i+2])
		if err != nil || cols < 1 || cols > 1<<16 {
			return nil, errf("%s: %q is not a column count", name, f[i+2])
		}
		if len(typ) != 1 || !strings.Contains("RILS", typ) {
			return nil, errf("%s: type %q (want R, I, L or S)", name, typ)
		}
		if name == "" {
			return nil, errf("a property without a name")
		}
		for _, c := range out {
			if c.name == name {
				return nil, errf("%s listed twice", name)
			}
		}
		out = append(out, column{name: name, typ: typ[0], cols: cols, at: at})
		at += cols
	}
	return out, nil
}

// errf is a fault of a comment line's value, placed (file, line,
// field) by the caller.
func errf(format string, args ...any) error { return fmt.Errorf(format, args...) }
