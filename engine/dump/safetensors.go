package dump

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/sampviz/sampviz/engine"
)

// maxHeaderBytes is the reference implementation's limit on the JSON header.
const maxHeaderBytes = 100_000_000

// metadataKey is the header entry (and npz member) that holds the metadata.
const metadataKey = "__metadata__"

// maxDims bounds a tensor's rank (numpy allows 64).
const maxDims = 64

// readableDTypes lists the dtypes a dump may hold, for messages.
const readableDTypes = "BF16, F16, F32, F64, I32, I64, U8 and BOOL"

// stEntry is one tensor entry of a safetensors header.
type stEntry struct {
	name       string
	dtype      engine.DType
	shape      []int64
	begin, end int64
}

// parseSafetensors reads the layout of safetensors: an 8-byte little-endian
// header length, a JSON header, then the data buffer the header's
// data_offsets point into.
func parseSafetensors(file string, data []byte) (*File, error) {
	if len(data) < 8 {
		return nil, fileError(file, "file is %d bytes, shorter than the 8-byte header length that starts a safetensors file", len(data))
	}
	n := binary.LittleEndian.Uint64(data)
	if (n > maxHeaderBytes || n > uint64(len(data)-8)) && (len(data) == 8 || data[8] != '{') {
		// Neither a plausible length nor a JSON header after it: most likely
		// not a safetensors file at all (a text file, another format).
		return nil, fileError(file, "not a safetensors file: it must start with an 8-byte header length and a JSON header, but its first 8 bytes read as a %d-byte header and no '{' follows them", n)
	}
	if n > maxHeaderBytes {
		return nil, fileError(file, "header is %d bytes, over the 100 MB limit", n)
	}
	if n > uint64(len(data)-8) {
		return nil, fileError(file, "header is %d bytes, past the end of the file (%d bytes follow the header length)", n, len(data)-8)
	}
	header, buf := data[8:8+n], data[8+n:]
	if len(header) == 0 || header[0] != '{' {
		return nil, fileError(file, "header does not start with '{'")
	}
	if !utf8.Valid(header) {
		return nil, fileError(file, "header is not valid UTF-8")
	}
	entries, meta, err := decodeSafetensorsHeader(file, header)
	if err != nil {
		return nil, err
	}
	f := &File{Name: file, Format: Safetensors, Meta: meta}
	for _, e := range entries {
		size := e.dtype.Size()
		need, ok := byteCount(e.shape, size)
		switch {
		case !ok:
			return nil, tensorError(file, e.name, "shape %s of %s is too large to address", formatShape(e.shape), e.dtype)
		case e.begin > e.end:
			return nil, tensorError(file, e.name, "data_offsets [%d, %d] are reversed", e.begin, e.end)
		case e.end > int64(len(buf)):
			return nil, tensorError(file, e.name, "data_offsets [%d, %d] lie outside the %d-byte data buffer", e.begin, e.end, len(buf))
		case e.end-e.begin != int64(need):
			return nil, tensorError(file, e.name, "%d bytes of data, but shape %s of %s needs %d", e.end-e.begin, formatShape(e.shape), e.dtype, need)
		}
		f.Tensors = append(f.Tensors, &engine.Tensor{
			Name:  e.name,
			DType: e.dtype,
			Shape: intShape(e.shape),
			Data:  buf[e.begin:e.end:e.end],
		})
	}
	if err := checkOverlap(file, entries); err != nil {
		return nil, err
	}
	return f, nil
}

// checkOverlap refuses two tensors whose bytes overlap (empty tensors hold no
// bytes and overlap nothing).
func checkOverlap(file string, entries []stEntry) error {
	var spans []stEntry
	for _, e := range entries {
		if e.end > e.begin {
			spans = append(spans, e)
		}
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].begin < spans[j].begin })
	for i := 1; i < len(spans); i++ {
		a, b := spans[i-1], spans[i]
		if b.begin < a.end {
			return tensorError(file, b.name, "data_offsets [%d, %d] overlap tensor %q at [%d, %d]", b.begin, b.end, a.name, a.begin, a.end)
		}
	}
	return nil
}

// decodeSafetensorsHeader reads the header's tensor entries in order and its
// __metadata__ map, refusing duplicate names.
func decodeSafetensorsHeader(file string, header []byte) ([]stEntry, map[string]string, error) {
	dec := json.NewDecoder(bytes.NewReader(header))
	dec.UseNumber()
	headerErr := func(tensor string, e *jsonRuleError) error {
		rule := e.rule
		if strings.HasPrefix(rule, "is not JSON") {
			rule = "header " + rule
		}
		return &Error{File: file, Tensor: tensor, Rule: rule, Err: e.err}
	}
	tok, rerr := nextToken(dec)
	if rerr != nil {
		return nil, nil, headerErr("", rerr)
	}
	if tok != json.Delim('{') {
		return nil, nil, fileError(file, "header is not a JSON object")
	}
	var (
		entries []stEntry
		meta    map[string]string
		seen    = map[string]bool{}
	)
	for dec.More() {
		tok, rerr := nextToken(dec)
		if rerr != nil {
			return nil, nil, headerErr("", rerr)
		}
		name := tok.(string) // object keys are always strings
		if seen[name] {
			if name == metadataKey {
				return nil, nil, fileError(file, "header holds %s twice", metadataKey)
			}
			return nil, nil, tensorError(file, name, "appears twice in the header")
		}
		seen[name] = true
		if name == metadataKey {
			m, rerr := decodeStringMap(dec, metadataKey)
			if rerr != nil {
				return nil, nil, headerErr("", rerr)
			}
			meta = m
			continue
		}
		e, rerr := decodeEntry(dec, name)
		if rerr != nil {
			return nil, nil, headerErr(name, rerr)
		}
		entries = append(entries, e)
	}
	if _, rerr := nextToken(dec); rerr != nil { // the closing brace
		return nil, nil, headerErr("", rerr)
	}
	if rerr := endOfJSON(dec, "header"); rerr != nil {
		return nil, nil, headerErr("", rerr)
	}
	return entries, meta, nil
}

// decodeEntry reads {"dtype": ..., "shape": [...], "data_offsets": [b, e]};
// other keys are ignored, as the reference implementation ignores them.
func decodeEntry(dec *json.Decoder, name string) (stEntry, *jsonRuleError) {
	e := stEntry{name: name}
	tok, rerr := nextToken(dec)
	if rerr != nil {
		return e, rerr
	}
	if tok != json.Delim('{') {
		return e, ruleErr("entry must be an object with dtype, shape and data_offsets, not %s", tokenKind(tok))
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, rerr := nextToken(dec)
		if rerr != nil {
			return e, rerr
		}
		key := tok.(string)
		if seen[key] {
			return e, ruleErr("entry has %q twice", key)
		}
		seen[key] = true
		switch key {
		case "dtype":
			tok, rerr := nextToken(dec)
			if rerr != nil {
				return e, rerr
			}
			s, ok := tok.(string)
			if !ok {
				return e, ruleErr(`"dtype" must be a string, not %s`, tokenKind(tok))
			}
			d, err := engine.ParseDType(s)
			if err != nil {
				return e, ruleErr("unknown dtype %q (sampviz reads %s)", s, readableDTypes)
			}
			e.dtype = d
		case "shape":
			shape, rerr := decodeIntList(dec, `"shape"`, maxDims)
			if rerr != nil {
				return e, rerr
			}
			for _, d := range shape {
				if d < 0 {
					return e, ruleErr("shape %s has a negative dimension", formatShape(shape))
				}
			}
			if shape == nil {
				shape = []int64{}
			}
			e.shape = shape
		case "data_offsets":
			offs, rerr := decodeIntList(dec, `"data_offsets"`, 2)
			if rerr != nil {
				return e, rerr
			}
			if len(offs) != 2 || offs[0] < 0 || offs[1] < 0 {
				return e, ruleErr(`"data_offsets" must be two non-negative integers, not %s`, formatShape(offs))
			}
			e.begin, e.end = offs[0], offs[1]
		default:
			if rerr := skipValue(dec); rerr != nil {
				return e, rerr
			}
		}
	}
	if _, rerr := nextToken(dec); rerr != nil { // the closing brace
		return e, rerr
	}
	for _, key := range []string{"dtype", "shape", "data_offsets"} {
		if !seen[key] {
			return e, ruleErr("entry lacks %q", key)
		}
	}
	return e, nil
}

// formatShape formats a shape as "[2, 3]".
func formatShape(shape []int64) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, d := range shape {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprint(&b, d)
	}
	b.WriteByte(']')
	return b.String()
}

// WriteSafetensors writes tensors, in the given order with their data
// contiguous, and meta (omitted when empty) in the safetensors layout: the
// 8-byte little-endian header length, the JSON header with "__metadata__"
// first, padded with spaces to a multiple of 8 bytes as the reference
// implementation pads it, then the data.
func WriteSafetensors(w io.Writer, tensors []*engine.Tensor, meta map[string]string) error {
	if err := checkWritable(tensors, false); err != nil {
		return fmt.Errorf("write safetensors: %w", err)
	}
	var h bytes.Buffer
	h.WriteByte('{')
	if len(meta) > 0 {
		h.WriteString(`"__metadata__":`)
		h.Write(compactJSON(meta))
	}
	var offset int64
	for i, t := range tensors {
		if i > 0 || len(meta) > 0 {
			h.WriteByte(',')
		}
		h.Write(compactJSON(t.Name))
		fmt.Fprintf(&h, `:{"dtype":"%s","shape":[`, t.DType)
		for j, d := range t.Shape {
			if j > 0 {
				h.WriteByte(',')
			}
			fmt.Fprint(&h, d)
		}
		end := offset + int64(len(t.Data))
		fmt.Fprintf(&h, `],"data_offsets":[%d,%d]}`, offset, end)
		offset = end
	}
	h.WriteByte('}')
	for h.Len()%8 != 0 {
		h.WriteByte(' ')
	}
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(h.Len()))
	if _, err := w.Write(n[:]); err != nil {
		return fmt.Errorf("write safetensors header length: %w", err)
	}
	if _, err := w.Write(h.Bytes()); err != nil {
		return fmt.Errorf("write safetensors header: %w", err)
	}
	for _, t := range tensors {
		if _, err := w.Write(t.Data); err != nil {
			return fmt.Errorf("write safetensors tensor %q: %w", t.Name, err)
		}
	}
	return nil
}

// compactJSON encodes v without HTML escaping and without a trailing newline.
func compactJSON(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // strings and string maps always encode
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// checkWritable refuses tensors that no reader could read back: nil, unnamed,
// reserved or duplicate names, invalid dtypes, negative dims, and data whose
// length disagrees with the shape. noBF16 refuses BF16 (npy has no bf16).
func checkWritable(tensors []*engine.Tensor, noBF16 bool) error {
	seen := map[string]bool{}
	for i, t := range tensors {
		if t == nil {
			return fmt.Errorf("tensor %d is nil", i)
		}
		switch {
		case t.Name == "":
			return fmt.Errorf("tensor %d has no name", i)
		case t.Name == metadataKey:
			return fmt.Errorf("tensor name %q is reserved for the metadata", t.Name)
		case seen[t.Name]:
			return fmt.Errorf("tensor %q appears twice", t.Name)
		case t.DType.Size() == 0:
			return fmt.Errorf("tensor %q has invalid dtype %s", t.Name, t.DType)
		case noBF16 && t.DType == engine.BF16:
			return fmt.Errorf("tensor %q is BF16, which npy cannot hold: write bf16 dumps as safetensors", t.Name)
		}
		seen[t.Name] = true
		shape := make([]int64, len(t.Shape))
		for j, d := range t.Shape {
			shape[j] = int64(d)
		}
		need, ok := byteCount(shape, t.DType.Size())
		if !ok {
			return fmt.Errorf("tensor %q: shape %s is invalid", t.Name, t.ShapeString())
		}
		if need != len(t.Data) {
			return fmt.Errorf("tensor %q: %d bytes of data, but shape %s of %s needs %d", t.Name, len(t.Data), t.ShapeString(), t.DType, need)
		}
	}
	return nil
}
