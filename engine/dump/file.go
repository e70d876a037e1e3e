package dump

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/sampviz/sampviz/engine"
)

// Format is a dump container.
type Format string

// The containers a dump may come in.
const (
	Safetensors Format = "safetensors"
	NPZ         Format = "npz"
	NPY         Format = "npy"
	PT          Format = "pt"
)

// File is a parsed dump: its tensors, still in their stored dtypes, and its
// metadata. Tensors of a File from Open alias a read-only memory mapping:
// they are valid until Close and must never be written to. The data of a
// deflated npz member or a big-endian array is nil until Load reads it
// (load.go).
type File struct {
	// Name is the file's base name, used in messages.
	Name   string
	Format Format
	// Tensors are in file order (header order for safetensors, member order
	// for npz). A bare .npy holds one tensor named "logits".
	Tensors []*engine.Tensor
	// Meta is the metadata string map (never nil).
	Meta map[string]string
	// Notices are things skipped while reading that are not errors (zip
	// members that are not .npy arrays).
	Notices []string
	// Limit bounds the memory reading the file may take: unpickling a .pt
	// file's pickle while it is parsed (OpenWithin, ParseWithin), then
	// inflating and converting tensors in Load (DefaultLoadLimit when 0).
	Limit int64

	unmap  func() error
	mapped []byte // the mapping of a File from Open
	// deferred holds the tensors whose data Load must inflate or convert
	// (their Data is nil until then), held what Load took so far.
	deferred map[string]*deferredData
	held     int64
}

// Tensor returns the tensor called name, or nil.
func (f *File) Tensor(name string) *engine.Tensor {
	for _, t := range f.Tensors {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// Close releases the file's memory mapping, if it has one; after it the
// tensors must not be read. Close is safe to call more than once.
func (f *File) Close() error {
	if f == nil || f.unmap == nil {
		return nil
	}
	unmap := f.unmap
	f.unmap, f.mapped = nil, nil
	return unmap()
}

// Open memory-maps the dump at path and parses it without copying tensor
// data. The caller must Close the File when done with its tensors (and with
// any Run built from them). Errors are *Error.
func Open(path string) (*File, error) { return OpenWithin(path, "", 0) }

// OpenWithin is Open for a file called name (an upload's own name; "": the
// path's base name), by which messages name it and its format is told when
// its content says nothing, and whose reading may take limit bytes of
// memory (0: DefaultLoadLimit), which becomes the File's Limit: a file that
// needs more to parse is refused with an *Error whose Need says how much.
func OpenWithin(path, name string, limit int64) (*File, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return openSGLangDir(path, limit)
	}
	if name == "" {
		name = baseName(path)
	}
	data, unmap, err := mapFile(path)
	if err != nil {
		return nil, &Error{File: name, Rule: "cannot read the file", Err: err}
	}
	f, err := ParseWithin(name, data, limit)
	if err != nil {
		_ = unmap()
		return nil, err
	}
	f.unmap, f.mapped = unmap, data
	return f, nil
}

// Parse parses a dump held in memory (an upload, a fuzz input). The format is
// told by the content (safetensors' header length then '{', zip's "PK",
// npy's "\x93NUMPY"), and by name's extension only when the content says
// nothing. The tensors alias data (all but inflated npz members and
// big-endian arrays), which the caller must keep unchanged while the File is
// in use. Errors are *Error.
func Parse(name string, data []byte) (*File, error) { return ParseWithin(name, data, 0) }

// ParseWithin is Parse for a run whose reading of the file may take limit
// bytes of memory (0: DefaultLoadLimit), as OpenWithin.
func ParseWithin(name string, data []byte, limit int64) (*File, error) {
	name = baseName(name)
	if limit <= 0 {
		limit = DefaultLoadLimit
	}
	var (
		f   *File
		err error
	)
	switch detect(name, data) {
	case Safetensors:
		f, err = parseSafetensors(name, data)
	case NPZ:
		f, err = parseNPZ(name, data)
	case NPY:
		f, err = parseBareNPY(name, data)
	case PT:
		f, err = parsePT(name, data, limit)
	default:
		return nil, notADump(name, data)
	}
	if err != nil {
		return nil, err
	}
	if f.Meta == nil {
		f.Meta = map[string]string{}
	}
	f.Limit = limit
	return f, nil
}

// compressions are the compressed formats a dump is often sent in, by
// their magic bytes, with the command that undoes each.
var compressions = []struct {
	magic      []byte
	name, undo string
}{
	{[]byte{0x1f, 0x8b}, "gzip", "gunzip"},
	{[]byte{0x28, 0xb5, 0x2f, 0xfd}, "zstd", "unzstd"},
	{[]byte("BZh"), "bzip2", "bunzip2"},
	{[]byte{0xfd, '7', 'z', 'X', 'Z', 0}, "xz", "unxz"},
}

// notADump is the error of a file in none of the containers: empty,
// compressed, or anything else.
func notADump(name string, data []byte) *Error {
	if len(data) == 0 {
		return fileError(name, "the file is empty (0 bytes), not a dump (safetensors, .npz, .npy or .pt)")
	}
	for _, c := range compressions {
		if bytes.HasPrefix(data, c.magic) {
			return fileError(name, "not a dump but a %s-compressed file: decompress it (%s) and give sampviz the dump inside", c.name, c.undo)
		}
	}
	return fileError(name, "not a dump: the content is neither safetensors, .npz, .npy nor .pt, and the name has none of their extensions")
}

var (
	npyMagic        = []byte("\x93NUMPY")
	zipMagic        = []byte("PK\x03\x04")
	zipEmptyMagic   = []byte("PK\x05\x06") // an archive with no members
	safetensorsMark = byte('{')
)

// detect tells the format from the content, then from the extension; an
// empty or compressed file is none, whatever its name.
func detect(name string, data []byte) Format {
	switch {
	case len(data) == 0:
		return ""
	case bytes.HasPrefix(data, npyMagic):
		return NPY
	case bytes.HasPrefix(data, legacyTorchMagic):
		return PT
	case bytes.HasPrefix(data, zipMagic), bytes.HasPrefix(data, zipEmptyMagic):
		if isTorchZip(data) || isPTName(name) {
			return PT
		}
		return NPZ
	case len(data) > 8 && data[8] == safetensorsMark:
		return Safetensors
	}
	for _, c := range compressions {
		if bytes.HasPrefix(data, c.magic) {
			return ""
		}
	}
	switch strings.ToLower(filepath.Ext(name)) {
	case ".safetensors":
		return Safetensors
	case ".npz":
		return NPZ
	case ".npy":
		return NPY
	case ".pt", ".pth":
		return PT
	}
	return ""
}

func baseName(path string) string {
	if path == "" {
		return "dump"
	}
	return filepath.Base(path)
}

// byteCount returns the bytes a tensor of shape and element size holds, and
// false when that does not fit in an int. It never overflows: a shape of
// [1e12, 1e12] is refused before anything is allocated.
func byteCount(shape []int64, size int) (int, bool) {
	for _, d := range shape {
		if d == 0 {
			return 0, true
		}
	}
	n := uint64(size)
	for _, d := range shape {
		if d < 0 || uint64(d) > math.MaxInt/n {
			return 0, false
		}
		n *= uint64(d)
	}
	return int(n), true
}

// intShape converts a shape checked by byteCount to ints.
func intShape(shape []int64) []int {
	out := make([]int, len(shape))
	for i, d := range shape {
		out[i] = int(d)
	}
	return out
}
