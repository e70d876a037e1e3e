package dump

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sampviz/sampviz/engine"
)

// maxNPYHeader bounds an npy header: numpy's own headers are under 200 bytes
// (it refuses those over 10000 by default), so this only stops a forged
// length from allocating.
const maxNPYHeader = 64 << 10

// npyDTypes lists what a tensor's npy descr may be, for messages.
const npyDTypes = "<f2, <f4, <f8, <i4, <i8, |u1 and |b1 (npy has no bf16: bf16 dumps must be safetensors)"

// npyHeader is a parsed npy header.
type npyHeader struct {
	descr string
	// dtype is the tensor dtype, or DTypeInvalid for string descrs.
	dtype engine.DType
	// text is 'U' (UTF-32 code units) or 'S' (bytes) for string descrs.
	text     byte
	itemSize int
	// bigEndian data must be byte-swapped into a buffer of its own.
	bigEndian bool
	fortran   bool
	shape     []int64
	// dataOffset is where the data starts; dataLen is what the shape needs.
	dataOffset int
	dataLen    int
}

// npyRuleError is a broken npy rule, turned into an *Error by the caller.
type npyRuleError struct{ rule string }

func (e *npyRuleError) Error() string { return e.rule }

func npyErr(format string, args ...any) *npyRuleError {
	return &npyRuleError{rule: fmt.Sprintf(format, args...)}
}

// npyHeaderLen returns the bytes before an npy array's data, from the first
// 12 bytes (10 suffice for version 1).
func npyHeaderLen(b []byte) (int, *npyRuleError) {
	if len(b) < 10 || !bytes.HasPrefix(b, npyMagic) {
		return 0, npyErr(`not an npy array: it does not start with "\x93NUMPY"`)
	}
	major, minor := b[6], b[7]
	switch major {
	case 1:
		return 10 + int(binary.LittleEndian.Uint16(b[8:])), nil
	case 2, 3:
		if len(b) < 12 {
			return 0, npyErr("npy header is cut short")
		}
		n := binary.LittleEndian.Uint32(b[8:])
		if n > maxNPYHeader {
			return 0, npyErr("npy header is %d bytes, over the %d KiB limit", n, maxNPYHeader>>10)
		}
		return 12 + int(n), nil
	}
	return 0, npyErr("npy format version %d.%d is not 1.0, 2.0 or 3.0", major, minor)
}

// parseNPYHeader parses the header at the start of b, which must hold the
// whole header (it may hold the data too). It checks the dtype and the
// shape but not the data.
func parseNPYHeader(b []byte) (npyHeader, *npyRuleError) {
	var h npyHeader
	total, rerr := npyHeaderLen(b)
	if rerr != nil {
		return h, rerr
	}
	if total > len(b) {
		return h, npyErr("npy header is %d bytes, but the array has only %d", total, len(b))
	}
	start := 10
	if b[6] != 1 {
		start = 12
	}
	text := b[start:total]
	if b[6] == 3 && !utf8.Valid(text) {
		return h, npyErr("npy header is not valid UTF-8")
	}
	dict, err := parsePyDict(string(text))
	if err != nil {
		return h, npyErr("npy header is not a Python dict literal: %v", err)
	}
	for _, key := range []string{"descr", "fortran_order", "shape"} {
		if _, ok := dict[key]; !ok {
			return h, npyErr("npy header lacks %q", key)
		}
	}
	for key := range dict {
		if key != "descr" && key != "fortran_order" && key != "shape" {
			return h, npyErr("npy header has the unknown key %q", key)
		}
	}
	descr, ok := dict["descr"].(string)
	if !ok {
		return h, npyErr("npy descr is a structured dtype; save a plain array")
	}
	h.descr = descr
	if h.fortran, ok = dict["fortran_order"].(bool); !ok {
		return h, npyErr("npy fortran_order must be True or False")
	}
	tuple, ok := dict["shape"].(pyTuple)
	if !ok {
		return h, npyErr("npy shape must be a tuple of integers")
	}
	for _, v := range tuple {
		d, ok := v.(int64)
		if !ok || d < 0 {
			return h, npyErr("npy shape must be a tuple of non-negative integers")
		}
		h.shape = append(h.shape, d)
	}
	if h.shape == nil {
		h.shape = []int64{}
	}
	if rerr := h.parseDescr(); rerr != nil {
		return h, rerr
	}
	if h.fortran && nonUnitDims(h.shape) > 1 {
		return h, npyErr("fortran_order is True: save a C-contiguous array (np.ascontiguousarray(a))")
	}
	n, ok := byteCount(h.shape, h.itemSize)
	if !ok {
		return h, npyErr("shape %s of %s is too large to address", formatShape(h.shape), descr)
	}
	h.dataOffset, h.dataLen = total, n
	return h, nil
}

// nonUnitDims counts the dimensions over 1: with at most one, Fortran and C
// order lay the elements out alike.
func nonUnitDims(shape []int64) int {
	n := 0
	for _, d := range shape {
		if d > 1 {
			n++
		}
	}
	return n
}

// parseDescr maps h.descr to a dtype (or a string kind) and byte order.
func (h *npyHeader) parseDescr() *npyRuleError {
	d := h.descr
	if len(d) < 2 {
		return npyErr("unsupported npy dtype %q: sampviz reads %s", d, npyDTypes)
	}
	kind := d[1:]
	switch d[0] {
	case '<', '|', '=':
	case '>':
		h.bigEndian = true
	default: // no byte-order mark
		kind = d
	}
	if kind[0] == 'U' || kind[0] == 'S' {
		n, err := strconv.ParseInt(kind[1:], 10, 32)
		if err != nil || n <= 0 {
			return npyErr("npy dtype %q is not a valid string dtype", d)
		}
		h.text = kind[0]
		h.itemSize = int(n)
		if kind[0] == 'U' {
			h.itemSize *= 4
		}
		return nil
	}
	switch kind {
	case "f2":
		h.dtype = engine.F16
	case "f4":
		h.dtype = engine.F32
	case "f8":
		h.dtype = engine.F64
	case "i4":
		h.dtype = engine.I32
	case "i8":
		h.dtype = engine.I64
	case "u1":
		h.dtype = engine.U8
	case "b1":
		h.dtype = engine.Bool
	case "V2":
		return npyErr("npy dtype %q is raw 2-byte values (bfloat16 saved by numpy?): bf16 dumps must be safetensors", d)
	case "O":
		return npyErr("npy dtype %q holds pickled Python objects, which sampviz never loads", d)
	default:
		return npyErr("unsupported npy dtype %q: sampviz reads %s", d, npyDTypes)
	}
	h.itemSize = h.dtype.Size()
	if h.itemSize == 1 {
		h.bigEndian = false
	}
	return nil
}

// swapBytes reverses every size-byte element of src into dst (which may be src).
func swapBytes(dst, src []byte, size int) {
	for i := 0; i+size <= len(src); i += size {
		for a, b := i, i+size-1; a <= b; a, b = a+1, b-1 {
			dst[a], dst[b] = src[b], src[a]
		}
	}
}

// parseBareNPY reads a single .npy file: one tensor, named logits.
func parseBareNPY(file string, data []byte) (*File, error) {
	const name = "logits"
	f := &File{Name: file, Format: NPY}
	h, rerr := parseNPYHeader(data)
	if rerr != nil {
		return nil, tensorError(file, name, "%s", rerr.rule)
	}
	t, err := h.tensor(f, name, data[h.dataOffset:])
	if err != nil {
		return nil, err
	}
	f.Tensors = []*engine.Tensor{t}
	return f, nil
}

// tensor builds the tensor of the array whose bytes are data, exactly the
// array's, aliasing them; a big-endian array is byte-swapped into a buffer
// of its own when f loads it.
func (h *npyHeader) tensor(f *File, name string, data []byte) (*engine.Tensor, error) {
	if h.text != 0 {
		return nil, tensorError(f.Name, name, "npy dtype %q holds strings, not numbers", h.descr)
	}
	if len(data) != h.dataLen {
		return nil, tensorError(f.Name, name, "%d bytes of npy data, but shape %s of %s needs %d", len(data), formatShape(h.shape), h.descr, h.dataLen)
	}
	t := &engine.Tensor{Name: name, DType: h.dtype, Shape: intShape(h.shape)}
	if !h.bigEndian || h.itemSize == 1 {
		t.Data = data[:h.dataLen:h.dataLen]
		return t, nil
	}
	size := h.itemSize
	f.deferLoad(t, int64(h.dataLen), "byte-swapping the big-endian array", func() ([]byte, error) {
		out := make([]byte, len(data))
		swapBytes(out, data, size)
		return out, nil
	})
	return t, nil
}

// npyText decodes a string array of one element (shape () or (1,)) as numpy
// would: UTF-32 code units or bytes, trailing NULs dropped.
func (h *npyHeader) npyText(data []byte) (string, *npyRuleError) {
	if h.text == 0 {
		return "", npyErr("must be a string array ('<U' or '|S'), not %q", h.descr)
	}
	if n, _ := byteCount(h.shape, 1); n != 1 {
		return "", npyErr("must hold one string, not shape %s", formatShape(h.shape))
	}
	if len(data) != h.dataLen {
		return "", npyErr("%d bytes of npy data, but %s needs %d", len(data), h.descr, h.dataLen)
	}
	if h.text == 'S' {
		return string(bytes.TrimRight(data, "\x00")), nil
	}
	var b strings.Builder
	for i := 0; i+4 <= len(data); i += 4 {
		var c uint32
		if h.bigEndian {
			c = binary.BigEndian.Uint32(data[i:])
		} else {
			c = binary.LittleEndian.Uint32(data[i:])
		}
		if c > utf8.MaxRune || (c >= 0xd800 && c < 0xe000) {
			return "", npyErr("is not valid UTF-32 (code point %#x)", c)
		}
		b.WriteRune(rune(c))
	}
	return strings.TrimRight(b.String(), "\x00"), nil
}

// npyHeaderFor builds the header of a version 1.0 npy file for t, padded
// with spaces so the data starts at a multiple of 64 bytes, as numpy does.
func npyHeaderFor(descr string, shape []int) []byte {
	var dict strings.Builder
	fmt.Fprintf(&dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr)
	for i, d := range shape {
		if i > 0 {
			dict.WriteString(", ")
		}
		fmt.Fprint(&dict, d)
	}
	if len(shape) == 1 {
		dict.WriteByte(',')
	}
	dict.WriteString("), }")
	text := dict.String()
	pad := 64 - (10+len(text)+1)%64 // numpy's padding: 64 when already aligned
	text += strings.Repeat(" ", pad) + "\n"
	out := make([]byte, 10, 10+len(text))
	copy(out, npyMagic)
	out[6], out[7] = 1, 0
	binary.LittleEndian.PutUint16(out[8:], uint16(len(text)))
	return append(out, text...)
}

// npyDescr returns the npy descr of a dtype; npy has no bf16.
func npyDescr(d engine.DType) (string, bool) {
	switch d {
	case engine.F16:
		return "<f2", true
	case engine.F32:
		return "<f4", true
	case engine.F64:
		return "<f8", true
	case engine.I32:
		return "<i4", true
	case engine.I64:
		return "<i8", true
	case engine.U8:
		return "|u1", true
	case engine.Bool:
		return "|b1", true
	}
	return "", false
}

// WriteNPY writes t as a version 1.0 .npy file (C order, little-endian). BF16
// tensors are refused: npy has no bf16, so bf16 dumps must be safetensors.
func WriteNPY(w io.Writer, t *engine.Tensor) error {
	if err := checkWritable([]*engine.Tensor{t}, true); err != nil {
		return fmt.Errorf("write npy: %w", err)
	}
	descr, _ := npyDescr(t.DType)
	if _, err := w.Write(npyHeaderFor(descr, t.Shape)); err != nil {
		return fmt.Errorf("write npy header: %w", err)
	}
	if _, err := w.Write(t.Data); err != nil {
		return fmt.Errorf("write npy data: %w", err)
	}
	return nil
}

// pyTuple is a Python tuple (or list) literal.
type pyTuple []any

// maxPyDepth bounds the nesting of a header literal.
const maxPyDepth = 16

// parsePyDict parses the Python dict literal of an npy header: string keys;
// values that are strings, True/False, integers, tuples or lists of those.
func parsePyDict(s string) (map[string]any, error) {
	p := &pyParser{s: s}
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	dict, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("it is not a dict")
	}
	p.space()
	if p.i != len(p.s) {
		return nil, fmt.Errorf("unexpected %q after the dict", p.s[p.i])
	}
	return dict, nil
}

type pyParser struct {
	s string
	i int
}

func (p *pyParser) space() {
	for p.i < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *pyParser) value(depth int) (any, error) {
	if depth > maxPyDepth {
		return nil, fmt.Errorf("nested more than %d deep", maxPyDepth)
	}
	p.space()
	if p.i >= len(p.s) {
		return nil, fmt.Errorf("it ends early")
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.dict(depth)
	case c == '(' || c == '[':
		return p.sequence(depth)
	case c == '\'' || c == '"':
		return p.str()
	case c == '-' || (c >= '0' && c <= '9'):
		return p.integer()
	case strings.HasPrefix(p.s[p.i:], "True"):
		p.i += 4
		return true, nil
	case strings.HasPrefix(p.s[p.i:], "False"):
		p.i += 5
		return false, nil
	default:
		return nil, fmt.Errorf("unexpected %q at byte %d", c, p.i)
	}
}

func (p *pyParser) dict(depth int) (any, error) {
	p.i++ // {
	m := map[string]any{}
	for {
		p.space()
		if p.i < len(p.s) && p.s[p.i] == '}' {
			p.i++
			return m, nil
		}
		k, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		key, ok := k.(string)
		if !ok {
			return nil, fmt.Errorf("a key is not a string")
		}
		if _, dup := m[key]; dup {
			return nil, fmt.Errorf("the key %q appears twice", key)
		}
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return nil, fmt.Errorf("no ':' after the key %q", key)
		}
		p.i++
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		m[key] = v
		if !p.separator('}') {
			return nil, fmt.Errorf("no ',' or '}' after the value of %q", key)
		}
	}
}

func (p *pyParser) sequence(depth int) (any, error) {
	closing := byte(')')
	if p.s[p.i] == '[' {
		closing = ']'
	}
	p.i++
	out := pyTuple{}
	for {
		p.space()
		if p.i < len(p.s) && p.s[p.i] == closing {
			p.i++
			return out, nil
		}
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		if !p.separator(closing) {
			return nil, fmt.Errorf("no ',' or %q in a sequence", closing)
		}
	}
}

// separator consumes a ',' (and reports true), or sees closing without
// consuming it (true), or finds neither (false).
func (p *pyParser) separator(closing byte) bool {
	p.space()
	if p.i < len(p.s) && p.s[p.i] == ',' {
		p.i++
		return true
	}
	return p.i < len(p.s) && p.s[p.i] == closing
}

func (p *pyParser) str() (any, error) {
	quote := p.s[p.i]
	p.i++
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		p.i++
		switch {
		case c == quote:
			return b.String(), nil
		case c == '\\' && p.i < len(p.s):
			b.WriteByte(p.s[p.i])
			p.i++
		default:
			b.WriteByte(c)
		}
	}
	return nil, fmt.Errorf("a string is not closed")
}

func (p *pyParser) integer() (any, error) {
	start := p.i
	if p.s[p.i] == '-' {
		p.i++
	}
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
	for p.i < len(p.s) && strings.IndexByte("0123456789.eE+-", p.s[p.i]) >= 0 {
		p.i++ // the rest of a float, to name it whole
	}
	text := p.s[start:p.i]
	if p.i < len(p.s) && (p.s[p.i] == 'L' || p.s[p.i] == 'l') { // Python 2 longs
		p.i++
	}
	v, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		if strings.ContainsAny(text, ".eE") {
			return nil, fmt.Errorf("%s is not an integer", text)
		}
		return nil, fmt.Errorf("%s is not a 64-bit integer", text)
	}
	if v == math.MinInt64 {
		return nil, fmt.Errorf("%q is out of range", text)
	}
	return v, nil
}
