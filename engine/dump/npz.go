package dump

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"

	"github.com/sampviz/sampviz/engine"
)

// maxDeflateRatio is the most deflate can expand its input (258-byte matches
// coded in under two bits each); a member that claims more is forged.
const maxDeflateRatio = 1032

// parseNPZ reads a zip archive of .npy members, as numpy's savez and
// savez_compressed write it. Stored members alias data; deflated ones are
// inflated once into their final buffer.
func parseNPZ(file string, data []byte) (*File, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) { // names are never used as paths here
		return nil, &Error{File: file, Rule: "not a valid zip archive", Err: err}
	}
	f := &File{Name: file, Format: NPZ}
	seen := map[string]bool{}
	for _, zf := range zr.File {
		if strings.HasSuffix(zf.Name, "/") { // a directory
			continue
		}
		name, ok := strings.CutSuffix(zf.Name, ".npy")
		if !ok {
			f.Notices = append(f.Notices, fmt.Sprintf("ignored zip member %q: not an .npy array", zf.Name))
			continue
		}
		if seen[name] {
			return nil, tensorError(file, name, "appears twice in the archive")
		}
		seen[name] = true
		h, body, owned, err := memberArray(file, name, data, zf)
		if err != nil {
			return nil, err
		}
		if name == metadataKey {
			meta, err := npzMetadata(file, &h, body)
			if err != nil {
				return nil, err
			}
			f.Meta = meta
			continue
		}
		t, err := h.tensor(file, name, body, owned)
		if err != nil {
			return nil, err
		}
		f.Tensors = append(f.Tensors, t)
	}
	return f, nil
}

// memberArray returns the npy header and the data bytes of one member.
// owned reports whether the bytes are a buffer of their own (inflated) rather
// than a slice of the archive.
func memberArray(file, name string, data []byte, zf *zip.File) (h npyHeader, body []byte, owned bool, err error) {
	fail := func(format string, args ...any) (npyHeader, []byte, bool, error) {
		return h, nil, false, tensorError(file, name, format, args...)
	}
	switch zf.Method {
	case zip.Store:
		off, err := zf.DataOffset()
		if err != nil {
			return h, nil, false, &Error{File: file, Tensor: name, Rule: "zip member has a bad local header", Err: err}
		}
		size := zf.UncompressedSize64
		if zf.CompressedSize64 != size {
			return fail("stored zip member is %d bytes but inflates to %d", zf.CompressedSize64, size)
		}
		if off < 0 || off > int64(len(data)) || size > uint64(int64(len(data))-off) {
			return fail("zip member's %d bytes lie past the end of the file", size)
		}
		raw := data[off : off+int64(size)]
		if crc32.ChecksumIEEE(raw) != zf.CRC32 {
			return fail("zip member fails its CRC-32 check")
		}
		h, rerr := parseNPYHeader(raw)
		if rerr != nil {
			return fail("%s", rerr.rule)
		}
		return h, raw[h.dataOffset:], false, nil
	case zip.Deflate:
		off, err := zf.DataOffset()
		if err != nil {
			return h, nil, false, &Error{File: file, Tensor: name, Rule: "zip member has a bad local header", Err: err}
		}
		if off < 0 || off > int64(len(data)) || zf.CompressedSize64 > uint64(int64(len(data))-off) {
			return fail("zip member's %d compressed bytes lie past the end of the file", zf.CompressedSize64)
		}
		return inflateMember(file, name, zf)
	}
	return fail("zip member uses compression method %d; npz members must be stored or deflated", zf.Method)
}

// inflateMember reads a deflated member's npy header, then inflates its data
// once into a buffer of exactly the size the header needs, refusing sizes
// that the archive's directory or deflate itself cannot back.
func inflateMember(file, name string, zf *zip.File) (npyHeader, []byte, bool, error) {
	var h npyHeader
	fail := func(format string, args ...any) (npyHeader, []byte, bool, error) {
		return h, nil, false, tensorError(file, name, format, args...)
	}
	inflateErr := func(err error) (npyHeader, []byte, bool, error) {
		if errors.Is(err, zip.ErrChecksum) {
			return fail("zip member fails its CRC-32 check")
		}
		return h, nil, false, &Error{File: file, Tensor: name, Rule: "cannot inflate the zip member", Err: err}
	}
	declared := zf.UncompressedSize64
	if declared/maxDeflateRatio > zf.CompressedSize64 {
		return fail("zip member claims %d bytes inflated from %d, more than deflate can produce", declared, zf.CompressedSize64)
	}
	rc, err := zf.Open()
	if err != nil {
		return inflateErr(err)
	}
	defer rc.Close()
	// The prelude, then the rest of the header: at most maxNPYHeader bytes.
	prelude := make([]byte, 12, 12+256)
	if n, err := io.ReadFull(rc, prelude); err != nil {
		if err != io.ErrUnexpectedEOF && err != io.EOF {
			return inflateErr(err)
		}
		prelude = prelude[:n] // a short member: npyHeaderLen says what is wrong
	}
	total, rerr := npyHeaderLen(prelude)
	if rerr != nil {
		return fail("%s", rerr.rule)
	}
	if uint64(total) > declared {
		return fail("npy header is %d bytes, but the zip member inflates to %d", total, declared)
	}
	header := prelude
	if total > len(prelude) {
		header = append(prelude, make([]byte, total-len(prelude))...)
		if _, err := io.ReadFull(rc, header[len(prelude):]); err != nil {
			return inflateErr(err)
		}
	}
	h, rerr = parseNPYHeader(header)
	if rerr != nil {
		return fail("%s", rerr.rule)
	}
	body := header[total:] // the part of the data the prelude read, if any
	if want := uint64(h.dataOffset) + uint64(h.dataLen); want != declared {
		return fail("zip member inflates to %d bytes, but its npy header and shape %s of %s need %d", declared, formatShape(h.shape), h.descr, want)
	}
	// The deflate bound and the file-size check above bound this buffer.
	buf := make([]byte, h.dataLen)
	n := copy(buf, body)
	if _, err := io.ReadFull(rc, buf[n:]); err != nil {
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			return fail("zip member inflates to fewer than its declared %d bytes", declared)
		}
		return inflateErr(err)
	}
	// Reading to the end makes archive/zip check the CRC and the size.
	var probe [1]byte
	switch n, err := io.ReadFull(rc, probe[:]); {
	case n == 0 && err == io.EOF:
	case n > 0 || errors.Is(err, zip.ErrFormat):
		return fail("zip member inflates past its declared %d bytes", declared)
	default:
		return inflateErr(err)
	}
	return h, buf, true, nil
}

// npzMetadata decodes the __metadata__ member: a 0-d string array holding a
// JSON object of strings.
func npzMetadata(file string, h *npyHeader, body []byte) (map[string]string, error) {
	text, rerr := h.npyText(body)
	if rerr != nil {
		return nil, tensorError(file, metadataKey, "%s", rerr.rule)
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	meta, jerr := decodeStringMap(dec, metadataKey)
	if jerr == nil {
		jerr = endOfJSON(dec, metadataKey)
	}
	if jerr != nil {
		rule := jerr.rule
		if strings.HasPrefix(rule, "is not JSON") {
			rule = metadataKey + " " + rule
		}
		return nil, &Error{File: file, Rule: rule, Err: jerr.err}
	}
	if meta == nil {
		meta = map[string]string{}
	}
	return meta, nil
}

// WriteNPZ writes tensors as stored (uncompressed) members NAME.npy of a zip
// archive, as numpy's savez does, and meta (omitted when empty) as a 0-d
// '<U' array named __metadata__ holding JSON. BF16 tensors are refused: npy
// has no bf16, so bf16 dumps must be safetensors.
func WriteNPZ(w io.Writer, tensors []*engine.Tensor, meta map[string]string) error {
	if err := checkWritable(tensors, true); err != nil {
		return fmt.Errorf("write npz: %w", err)
	}
	zw := zip.NewWriter(w)
	if len(meta) > 0 {
		text := []rune(string(compactJSON(meta)))
		body := make([]byte, 4*len(text))
		for i, r := range text {
			body[4*i] = byte(r)
			body[4*i+1] = byte(r >> 8)
			body[4*i+2] = byte(r >> 16)
			body[4*i+3] = byte(r >> 24)
		}
		header := npyHeaderFor(fmt.Sprintf("<U%d", len(text)), nil)
		if err := writeStored(zw, metadataKey+".npy", header, body); err != nil {
			return fmt.Errorf("write npz: %w", err)
		}
	}
	for _, t := range tensors {
		descr, _ := npyDescr(t.DType)
		if err := writeStored(zw, t.Name+".npy", npyHeaderFor(descr, t.Shape), t.Data); err != nil {
			return fmt.Errorf("write npz: %w", err)
		}
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("write npz directory: %w", err)
	}
	return nil
}

// writeStored writes one uncompressed member whose CRC and sizes are in its
// local header (no data descriptor), so any zip reader can read it.
func writeStored(zw *zip.Writer, name string, header, body []byte) error {
	crc := crc32.NewIEEE()
	crc.Write(header)
	crc.Write(body)
	size := uint64(len(header) + len(body))
	mw, err := zw.CreateRaw(&zip.FileHeader{
		Name:               name,
		Method:             zip.Store,
		CRC32:              crc.Sum32(),
		CompressedSize64:   size,
		UncompressedSize64: size,
	})
	if err != nil {
		return fmt.Errorf("member %q: %w", name, err)
	}
	if _, err := mw.Write(header); err != nil {
		return fmt.Errorf("member %q: %w", name, err)
	}
	if _, err := mw.Write(body); err != nil {
		return fmt.Errorf("member %q: %w", name, err)
	}
	return nil
}
