package dump

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"

	"github.com/sampviz/sampviz/engine"
)

// maxMetadata bounds the __metadata__ member, which is read at once: a JSON
// object of settings is a few hundred bytes.
const maxMetadata = 1 << 20

// parseNPZ reads a zip archive of .npy members, as numpy's savez and
// savez_compressed write it. Stored members alias data; deflated ones are
// read up to the end of their npy header here and inflated by File.Load,
// once, into their final buffer (load.go).
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
		if err := f.addMember(name, data, zf); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// addMember reads one member's npy header and files its tensor (or the
// metadata).
func (f *File) addMember(name string, data []byte, zf *zip.File) error {
	file := f.Name
	fail := func(format string, args ...any) error { return tensorError(file, name, format, args...) }
	off, err := zf.DataOffset()
	if err != nil {
		return &Error{File: file, Tensor: name, Rule: "zip member has a bad local header", Err: err}
	}
	switch zf.Method {
	case zip.Store:
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
		return f.addArray(name, &h, raw[h.dataOffset:])
	case zip.Deflate:
		if off < 0 || off > int64(len(data)) || zf.CompressedSize64 > uint64(int64(len(data))-off) {
			return fail("zip member's %d compressed bytes lie past the end of the file", zf.CompressedSize64)
		}
		h, err := memberHeader(file, name, zf)
		if err != nil {
			return err
		}
		if name == metadataKey {
			if h.dataLen > maxMetadata {
				return fail("is %d bytes; metadata is a JSON object of settings, at most %d bytes", h.dataLen, maxMetadata)
			}
			body, err := inflateMember(file, name, zf, &h)
			if err != nil {
				return err
			}
			return f.addArray(name, &h, body)
		}
		if h.text != 0 {
			return fail("npy dtype %q holds strings, not numbers", h.descr)
		}
		t := &engine.Tensor{Name: name, DType: h.dtype, Shape: intShape(h.shape)}
		f.Tensors = append(f.Tensors, t)
		d := f.deferLoad(t, int64(h.dataLen), "inflating the zip member", func() ([]byte, error) {
			body, err := inflateMember(file, name, zf, &h)
			if err != nil || !h.bigEndian || h.itemSize == 1 {
				return body, err
			}
			swapBytes(body, body, h.itemSize)
			return body, nil
		})
		d.verify = func(ctx context.Context) error { return verifyMember(ctx, file, name, zf, &h) }
		return nil
	}
	return fail("zip member uses compression method %d; npz members must be stored or deflated", zf.Method)
}

// addArray files the array h of a member whose data bytes are body: the
// metadata, or a tensor.
func (f *File) addArray(name string, h *npyHeader, body []byte) error {
	if name == metadataKey {
		meta, err := npzMetadata(f.Name, h, body)
		if err != nil {
			return err
		}
		f.Meta = meta
		return nil
	}
	t, err := h.tensor(f, name, body)
	if err != nil {
		return err
	}
	f.Tensors = append(f.Tensors, t)
	return nil
}

// memberHeader inflates a deflated member up to the end of its npy header
// and checks that the header's shape accounts for the member's declared
// size.
func memberHeader(file, name string, zf *zip.File) (npyHeader, error) {
	var h npyHeader
	rc, err := zf.Open()
	if err != nil {
		return h, inflateError(file, name, err)
	}
	defer rc.Close()
	declared := zf.UncompressedSize64
	header, _, err := readNPYHeader(file, name, rc, declared)
	if err != nil {
		return h, err
	}
	h, rerr := parseNPYHeader(header)
	if rerr != nil {
		return h, tensorError(file, name, "%s", rerr.rule)
	}
	if want := uint64(h.dataOffset) + uint64(h.dataLen); want != declared {
		return h, tensorError(file, name, "zip member inflates to %d bytes, but its npy header and shape %s of %s need %d", declared, formatShape(h.shape), h.descr, want)
	}
	return h, nil
}

// readNPYHeader reads the npy header from the start of a member's stream
// that inflates to declared bytes: the prelude, then at most maxNPYHeader
// bytes.
func readNPYHeader(file, name string, r io.Reader, declared uint64) (header []byte, total int, err error) {
	prelude := make([]byte, 12, 12+256)
	if n, err := io.ReadFull(r, prelude); err != nil {
		if err != io.ErrUnexpectedEOF && err != io.EOF {
			return nil, 0, inflateError(file, name, err)
		}
		prelude = prelude[:n] // a short member: npyHeaderLen says what is wrong
	}
	total, rerr := npyHeaderLen(prelude)
	if rerr != nil {
		return nil, 0, tensorError(file, name, "%s", rerr.rule)
	}
	if uint64(total) > declared {
		return nil, 0, tensorError(file, name, "npy header is %d bytes, but the zip member inflates to %d", total, declared)
	}
	header = prelude
	if total > len(prelude) {
		header = append(prelude, make([]byte, total-len(prelude))...)
		if _, err := io.ReadFull(r, header[len(prelude):]); err != nil {
			return nil, 0, inflateError(file, name, err)
		}
	}
	return header, total, nil
}

// inflateError turns an error of the zip reader into an *Error.
func inflateError(file, name string, err error) error {
	if errors.Is(err, zip.ErrChecksum) {
		return tensorError(file, name, "zip member fails its CRC-32 check")
	}
	return &Error{File: file, Tensor: name, Rule: "cannot inflate the zip member", Err: err}
}

// inflateMember inflates the data of a deflated member whose header
// memberHeader read as h, once, into a buffer of exactly the size the header
// needs (the caller has budgeted it), and checks that the member ends there
// and passes its CRC.
func inflateMember(file, name string, zf *zip.File, h *npyHeader) ([]byte, error) {
	buf := make([]byte, h.dataLen)
	if err := streamMember(context.Background(), file, name, zf, h, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// verifyMember inflates a deflated member as inflateMember does, into
// nothing, so that a member that fails its CRC or inflates past its
// declared size is refused, in the same words, without the memory of its
// data. It stops when ctx is done.
func verifyMember(ctx context.Context, file, name string, zf *zip.File, h *npyHeader) error {
	return streamMember(ctx, file, name, zf, h, nil)
}

// streamMember inflates the data of a deflated member whose header
// memberHeader read as h into buf (h.dataLen bytes), or through a small
// buffer when buf is nil, and checks that the member ends there and passes
// its CRC.
func streamMember(ctx context.Context, file, name string, zf *zip.File, h *npyHeader, buf []byte) error {
	rc, err := zf.Open()
	if err != nil {
		return inflateError(file, name, err)
	}
	defer rc.Close()
	header, _, err := readNPYHeader(file, name, rc, zf.UncompressedSize64)
	if err != nil {
		return err
	}
	// The part of the data the prelude read, if any.
	done := min(len(header)-min(h.dataOffset, len(header)), h.dataLen)
	if buf != nil {
		copy(buf, header[min(h.dataOffset, len(header)):])
		_, err = io.ReadFull(rc, buf[done:])
	} else {
		scratch := make([]byte, 64<<10)
		for left := h.dataLen - done; left > 0 && err == nil; {
			if cerr := ctx.Err(); cerr != nil {
				return cerr
			}
			var n int
			n, err = io.ReadFull(rc, scratch[:min(left, len(scratch))])
			left -= n
		}
	}
	if err != nil {
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			return tensorError(file, name, "zip member inflates to fewer than its declared %d bytes", zf.UncompressedSize64)
		}
		return inflateError(file, name, err)
	}
	// Reading to the end makes archive/zip check the CRC and the size.
	var probe [1]byte
	switch n, err := io.ReadFull(rc, probe[:]); {
	case n == 0 && err == io.EOF:
	case n > 0 || errors.Is(err, zip.ErrFormat):
		return tensorError(file, name, "zip member inflates past its declared %d bytes", zf.UncompressedSize64)
	default:
		return inflateError(file, name, err)
	}
	return nil
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
