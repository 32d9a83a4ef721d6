// Package jsonscan reads a few top-level members of a JSON object without decoding the rest.
//
// It exists for the webhook receiver's hot path, where encoding/json's Decoder spent tens of
// microseconds per event to find two strings. The result is exactly what encoding/json would
// give: the scanner validates as json.Valid does and falls back to json.Unmarshal for any string
// that needs unescaping.
package jsonscan

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"unicode/utf8"
)

// maxDepth is encoding/json's nesting limit: json.Valid rejects a document with more open
// objects and arrays than this.
const maxDepth = 10000

// TopLevelStrings sets values[i] to the top-level member keys[i] of the JSON object in body and
// reports whether body is a valid JSON object. It panics if values is shorter than keys.
//
// It gives exactly what a Decoder loop over the object's members would: keys match after
// unescaping and case-sensitively, the last of duplicate members wins, a member that is not a
// string (null included) reads as "", a missing one as "", and members of nested objects do
// not count. When it returns false every value is "".
//
// It allocates nothing but the returned strings, unless a key or value has escapes or invalid
// UTF-8: those are decoded by json.Unmarshal.
func TopLevelStrings(body []byte, values []string, keys ...string) bool {
	values = values[:len(keys)]
	clear(values)
	if !topLevel(body, keys, values, nil, nil) {
		clear(values)
		return false
	}
	return true
}

// UniqueTopLevelStrings is TopLevelStrings that also reports a key decoders may read
// differently: ambiguous is the index of the first key that more than one top-level member
// names, or -1. A member names a key when its unescaped key equals it under Unicode case
// folding (strings.EqualFold), the exact spelling included: encoding/json matches struct
// fields so, and lets the last match win, while a map or a case-sensitive decoder keeps
// another. values are as TopLevelStrings sets them, from the exact spelling.
func UniqueTopLevelStrings(body []byte, values []string, keys ...string) (ok bool, ambiguous int) {
	values = values[:len(keys)]
	clear(values)
	var buf [4]int
	counts := buf[:0]
	if len(keys) > len(buf) {
		counts = make([]int, len(keys))
	}
	counts = counts[:len(keys)]
	if !topLevel(body, keys, values, counts, nil) {
		clear(values)
		return false, -1
	}
	return true, firstAmbiguous(counts)
}

// TopLevelMember returns the value of the top-level member key of the JSON object in body as
// written (a string with its quotes and escapes), the last one when several have exactly that
// key, or nil when none has; named counts the members that name key as UniqueTopLevelStrings
// counts them. ok reports whether body is a valid JSON object.
func TopLevelMember(body []byte, key string) (value []byte, named int, ok bool) {
	var counts [1]int
	var raws [1][]byte
	if !topLevel(body, []string{key}, nil, counts[:], raws[:]) {
		return nil, 0, false
	}
	return raws[0], counts[0], true
}

func firstAmbiguous(counts []int) int {
	for k, n := range counts {
		if n > 1 {
			return k
		}
	}
	return -1
}

// topLevel scans the object in body and, for each top-level member whose key is keys[k], sets
// values[k] (when values is not nil) and raws[k] (the value as written, when raws is not nil);
// when counts is not nil it counts in counts[k] the members whose key equals keys[k] under
// case folding. It reports whether body is a valid JSON object.
//
//nolint:funlen // one scanner loop; splitting it costs an allocation per member
func topLevel(body []byte, keys, values []string, counts []int, raws [][]byte) bool {
	s := scanner{b: body}
	i := s.ws(0)
	if i >= len(body) || body[i] != '{' {
		return false // not JSON, or JSON that is not an object: false either way
	}
	s.depth = 1
	i = s.ws(i + 1)
	if i < len(body) && body[i] == '}' {
		return s.ws(i+1) == len(body)
	}
	for {
		// A member: key, colon, value.
		if i >= len(body) || body[i] != '"' {
			return false
		}
		keyStart := i
		var keyPlain, valPlain bool
		if i, keyPlain = s.str(i); i < 0 {
			return false
		}
		keyEnd := i
		i = s.ws(i)
		if i >= len(body) || body[i] != ':' {
			return false
		}
		i = s.ws(i + 1)
		if i >= len(body) {
			return false
		}
		valStart := i
		isString := body[i] == '"'
		if isString {
			i, valPlain = s.str(i)
		} else {
			i = s.value(i)
		}
		if i < 0 {
			return false
		}
		valEnd := i

		// The key is decoded only if it has escapes or invalid UTF-8, and then once.
		key := body[keyStart+1 : keyEnd-1]
		if !keyPlain {
			decoded, ok := unquote(body[keyStart:keyEnd])
			if !ok {
				return false
			}
			key = []byte(decoded)
		}
		for k, want := range keys {
			if counts != nil && foldEqual(key, want) {
				counts[k]++
			}
			if string(key) != want {
				continue
			}
			if raws != nil {
				raws[k] = body[valStart:valEnd]
			}
			if values == nil {
				continue
			}
			switch {
			case !isString:
				values[k] = ""
			case valPlain:
				values[k] = string(body[valStart+1 : valEnd-1])
			default:
				v, ok := unquote(body[valStart:valEnd])
				if !ok {
					return false
				}
				values[k] = v
			}
		}

		i = s.ws(i)
		if i >= len(body) {
			return false
		}
		switch body[i] {
		case ',':
			i = s.ws(i + 1)
		case '}':
			return s.ws(i+1) == len(body)
		default:
			return false
		}
	}
}

// foldEqual is strings.EqualFold(string(key), want). Case partners differ in UTF-8 length by a
// factor of at most 3 (k, U+212A KELVIN SIGN), so a key far longer or shorter is rejected
// without comparing.
func foldEqual(key []byte, want string) bool {
	if len(key) > 3*len(want) || len(want) > 3*len(key) {
		return false
	}
	return bytes.EqualFold(key, []byte(want))
}

// unquote decodes a string token with encoding/json itself, so escapes, surrogates and invalid
// UTF-8 come out exactly as a Decoder would produce them. It fails only if the scanner accepted
// a token encoding/json does not; the caller then reports the body as invalid, as json.Valid
// would.
func unquote(q []byte) (string, bool) {
	var s string
	err := json.Unmarshal(q, &s)
	return s, err == nil
}

// scanner validates JSON as encoding/json's scanner does. Its methods return the index after
// what they consumed, or -1 if it is not valid JSON.
type scanner struct {
	b     []byte
	depth int                     // open objects and arrays
	stack [maxDepth/64 + 1]uint64 // bit d set: the container at depth d is an object
}

// ws skips JSON whitespace.
func (s *scanner) ws(i int) int {
	for i < len(s.b) {
		switch s.b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// plainByte marks the bytes a string may hold as they are: not a quote, a backslash or a
// control character.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str scans the string token at b[i] == '"'. plain means its contents decode to themselves: no
// escapes and valid UTF-8.
func (s *scanner) str(i int) (end int, plain bool) {
	b := s.b
	start := i + 1
	i = start
	var high byte // OR of every byte: bit 7 set if any is not ASCII
	escaped := false
	for {
		// Eight bytes at a time while none needs a look; strings are most of an event's bytes.
		var high8 uint64
		for i+8 <= len(b) {
			w := binary.LittleEndian.Uint64(b[i:])
			if special8(w) {
				break
			}
			high8 |= w
			i += 8
		}
		if high8&hiBits != 0 {
			high |= utf8.RuneSelf
		}
		for i < len(b) && plainByte[b[i]] {
			high |= b[i]
			i++
		}
		if i >= len(b) {
			return -1, false
		}
		switch b[i] {
		case '"':
			plain = !escaped && (high < utf8.RuneSelf || utf8.Valid(b[start:i]))
			return i + 1, plain
		case '\\':
			escaped = true
			i++
			if i >= len(b) {
				return -1, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if i+4 >= len(b) || !isHex(b[i+1]) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) {
					return -1, false
				}
				i += 5
			default:
				return -1, false
			}
		default: // a control character
			return -1, false
		}
	}
}

const (
	loBits = 0x0101010101010101
	hiBits = 0x8080808080808080
)

// special8 reports whether any of the eight bytes in w is a quote, a backslash or a control
// character (the bytes plainByte rejects), with the usual "has a zero byte" bit trick.
func special8(w uint64) bool {
	q := w ^ (loBits * '"')
	bs := w ^ (loBits * '\\')
	return ((q-loBits)&^q|(bs-loBits)&^bs|(w-loBits*0x20)&^w)&hiBits != 0
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at b[i].
func (s *scanner) number(i int) int {
	b := s.b
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = s.digits(i + 1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return -1
		}
		i = s.digits(i)
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return -1
		}
		i = s.digits(i)
	}
	return i
}

func (s *scanner) digits(i int) int {
	for i < len(s.b) && isDigit(s.b[i]) {
		i++
	}
	return i
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// literal scans lit at b[i].
func (s *scanner) literal(i int, lit string) int {
	if len(s.b)-i < len(lit) || string(s.b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// push opens a container; false when that exceeds encoding/json's nesting limit.
func (s *scanner) push(object bool) bool {
	if s.depth >= maxDepth {
		return false
	}
	s.depth++
	w, bit := s.depth/64, uint64(1)<<(s.depth%64)
	if object {
		s.stack[w] |= bit
	} else {
		s.stack[w] &^= bit
	}
	return true
}

func (s *scanner) inObject() bool {
	return s.stack[s.depth/64]&(uint64(1)<<(s.depth%64)) != 0
}

// value scans one value, however deeply nested, starting at b[i] (not whitespace). It loops
// instead of recursing so that a deep document costs no stack growth.
func (s *scanner) value(i int) int {
	b := s.b
	base := s.depth
	for {
		// A value starts at b[i].
		if i >= len(b) {
			return -1
		}
		switch c := b[i]; c {
		case '{', '[':
			if !s.push(c == '{') {
				return -1
			}
			i = s.ws(i + 1)
			if i < len(b) && b[i] == c+2 { // '}' or ']': empty
				i++
				s.depth--
				break
			}
			if c == '{' {
				if i = s.key(i); i < 0 {
					return -1
				}
			}
			continue // to the first element's value
		case '"':
			i, _ = s.str(i)
		case 't':
			i = s.literal(i, "true")
		case 'f':
			i = s.literal(i, "false")
		case 'n':
			i = s.literal(i, "null")
		default:
			if c != '-' && !isDigit(c) {
				return -1
			}
			i = s.number(i)
		}
		if i < 0 {
			return -1
		}

		// After a value: close containers until one continues with another element.
	next:
		for {
			if s.depth == base {
				return i
			}
			i = s.ws(i)
			if i >= len(b) {
				return -1
			}
			switch c := b[i]; {
			case c == ',':
				i = s.ws(i + 1)
				if s.inObject() {
					if i = s.key(i); i < 0 {
						return -1
					}
				}
				break next
			case c == '}' && s.inObject(), c == ']' && !s.inObject():
				i++
				s.depth--
			default:
				return -1
			}
		}
	}
}

// key scans `"key" :` and the whitespace after it, starting at b[i].
func (s *scanner) key(i int) int {
	if i >= len(s.b) || s.b[i] != '"' {
		return -1
	}
	if i, _ = s.str(i); i < 0 {
		return -1
	}
	i = s.ws(i)
	if i >= len(s.b) || s.b[i] != ':' {
		return -1
	}
	return s.ws(i + 1)
}
