package dump

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/big"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/nlpodyssey/gopickle/pickle"
	"github.com/nlpodyssey/gopickle/types"

	"github.com/sampviz/sampviz/engine"
)

// .pt files are what torch.save writes: a zip archive whose PREFIX/data.pkl
// is a pickle of the saved object, with each tensor's storage in an
// uncompressed member PREFIX/data/KEY. The pickle is read by gopickle's
// unpickler, but only after a scan of its opcodes (scanPickle) that refuses
// anything a dump of tensors and plain containers never needs, bounds
// every length by the bytes that follow it and the unpickler's memory by
// the file's limit, and only with a class table (ptGlobals) that knows
// tensors, their storages and OrderedDict: every other global is refused
// by name. Nothing in a pickle is ever run.
//
// What the pickle holds becomes the file's tensors (DUMPS.md, ".pt files"):
// a bare tensor is `logits`; a dict (or OrderedDict, a state dict) maps
// names to tensors, nested dicts joining their keys with "."; the entry
// __metadata__, a dict of strings, is the metadata; other plain values are
// ignored with a notice.

// legacyTorchMagic starts torch.save's pre-1.6 format (a pickled magic
// number as a LONG1 of protocol 2), which is not a zip archive.
var legacyTorchMagic = []byte("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19")

// ptPlain says, in a refusal, what a .pt dump may hold.
const ptPlain = "a .pt dump may hold only tensors and plain containers (dict, list, tuple, str, int, float, bool, None)"

// maxPTDepth bounds the nesting of dicts whose keys name tensors.
const maxPTDepth = 16

// isTorchZip reports whether data is a zip archive as torch.save writes it:
// one member PREFIX/data.pkl.
func isTorchZip(data []byte) bool {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		return false
	}
	for _, zf := range zr.File {
		if dir, base, ok := strings.Cut(zf.Name, "/"); ok && dir != "" && base == "data.pkl" {
			return true
		}
	}
	return false
}

// isPTName reports whether a file's name says torch.save (.pt, .pth).
func isPTName(name string) bool {
	ext := strings.ToLower(filepath.Ext(name))
	return ext == ".pt" || ext == ".pth"
}

// parsePT reads a torch.save zip archive, unpickling it within limit bytes
// of memory. Stored storages alias data.
func parsePT(file string, data []byte, limit int64) (*File, error) {
	if bytes.HasPrefix(data, legacyTorchMagic) {
		return nil, fileError(file, "is in torch.save's legacy format (_use_new_zipfile_serialization=False), which sampviz does not read: save it again with torch.save's default")
	}
	r, err := openTorchZip(file, data, limit)
	if err != nil {
		return nil, err
	}
	root, err := r.unpickle()
	if err != nil {
		return nil, err
	}
	f := &File{Name: file, Format: PT, Meta: map[string]string{}}
	var named []ptNamed
	switch v := root.(type) {
	case *ptTensor:
		named = append(named, ptNamed{"logits", v})
	case *types.Dict, *types.OrderedDict:
		if named, err = r.walk(v, "", 0, f, map[any]bool{}); err != nil {
			return nil, err
		}
	default:
		return nil, fileError(file, "holds %s; a .pt dump holds one tensor (read as logits) or a dict of name → tensor", ptKind(root))
	}
	seen := map[string]bool{}
	for _, n := range named {
		if seen[n.name] {
			return nil, tensorError(file, n.name, "appears twice in the pickle")
		}
		seen[n.name] = true
		t, err := r.tensor(n.name, n.t)
		if err != nil {
			return nil, err
		}
		f.Tensors = append(f.Tensors, t)
	}
	if err := r.checkStorageOverlap(); err != nil {
		return nil, err
	}
	return f, nil
}

// torchZip is an open torch.save archive.
type torchZip struct {
	file    string
	data    []byte
	prefix  string               // the archive's folder, "archive" or the file's stem
	members map[string]*zip.File // by full name
	// storages are those the pickle named, by key.
	storages map[string]*ptStorage
	// limit bounds the memory unpickling may take.
	limit int64
}

// openTorchZip finds the archive's pickle and storages; unpickle will take
// at most limit bytes of memory.
func openTorchZip(file string, data []byte, limit int64) (*torchZip, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) { // names are never used as paths here
		return nil, &Error{File: file, Rule: "not a valid zip archive", Err: err}
	}
	r := &torchZip{file: file, data: data, members: map[string]*zip.File{}, storages: map[string]*ptStorage{}, limit: limit}
	var prefixes []string
	for _, zf := range zr.File {
		if r.members[zf.Name] != nil {
			return nil, fileError(file, "the archive holds member %q twice", zf.Name)
		}
		r.members[zf.Name] = zf
		if dir, base, ok := strings.Cut(zf.Name, "/"); ok && dir != "" && base == "data.pkl" {
			prefixes = append(prefixes, dir)
		}
	}
	switch len(prefixes) {
	case 0:
		return nil, fileError(file, "is a zip archive without a PREFIX/data.pkl member, so neither a torch.save file nor an .npz of .npy arrays")
	case 1:
		r.prefix = prefixes[0]
	default:
		return nil, fileError(file, "holds %d pickles (%s); torch.save writes one", len(prefixes), strings.Join(prefixes, "/data.pkl, ")+"/data.pkl")
	}
	if r.members[r.prefix+"/constants.pkl"] != nil {
		return nil, fileError(file, "is a TorchScript archive (torch.jit.save), not a torch.save file of tensors")
	}
	if zf := r.members[r.prefix+"/byteorder"]; zf != nil {
		order, err := r.small(zf, 16)
		if err != nil {
			return nil, err
		}
		if s := strings.TrimSpace(string(order)); s != "little" {
			return nil, fileError(file, "was saved on a %q-endian machine; sampviz reads little-endian storages only", s)
		}
	}
	return r, nil
}

// small reads a small member whole, refusing one over limit bytes.
func (r *torchZip) small(zf *zip.File, limit uint64) ([]byte, error) {
	if zf.UncompressedSize64 > limit {
		return nil, fileError(r.file, "member %q is %d bytes, over its %d-byte limit", zf.Name, zf.UncompressedSize64, limit)
	}
	return r.read(zf)
}

// read reads a member whole: a stored member aliases the archive, a
// deflated one is inflated into a buffer of its declared size, which
// deflate's own bound ties to the bytes the archive holds.
func (r *torchZip) read(zf *zip.File) ([]byte, error) {
	switch zf.Method {
	case zip.Store:
		return r.stored(zf)
	case zip.Deflate:
	default:
		return nil, fileError(r.file, "member %q uses compression method %d; torch.save stores its members", zf.Name, zf.Method)
	}
	off, err := zf.DataOffset()
	if err != nil {
		return nil, &Error{File: r.file, Rule: fmt.Sprintf("member %q has a bad local header", zf.Name), Err: err}
	}
	if off < 0 || off > int64(len(r.data)) || zf.CompressedSize64 > uint64(int64(len(r.data))-off) {
		return nil, fileError(r.file, "member %q's %d compressed bytes lie past the end of the file", zf.Name, zf.CompressedSize64)
	}
	// torch.save stores its members: a deflated one is read at once, so it
	// is bounded here rather than by the run's budget (File.Load).
	if zf.UncompressedSize64 > DefaultLoadLimit {
		return nil, fileError(r.file, "member %q inflates to %d bytes, more than the %d a deflated .pt member may (torch.save stores its members uncompressed)", zf.Name, zf.UncompressedSize64, DefaultLoadLimit)
	}
	if zf.UncompressedSize64/1032 > zf.CompressedSize64 { // 1032: the most deflate expands
		return nil, fileError(r.file, "member %q claims %d bytes inflated from %d, more than deflate can produce", zf.Name, zf.UncompressedSize64, zf.CompressedSize64)
	}
	rc, err := zf.Open()
	if err != nil {
		return nil, &Error{File: r.file, Rule: fmt.Sprintf("cannot inflate member %q", zf.Name), Err: err}
	}
	defer rc.Close()
	buf := make([]byte, zf.UncompressedSize64)
	if _, err := io.ReadFull(rc, buf); err != nil {
		return nil, &Error{File: r.file, Rule: fmt.Sprintf("cannot inflate member %q", zf.Name), Err: err}
	}
	if n, err := rc.Read(make([]byte, 1)); n > 0 || (err != nil && err != io.EOF) {
		return nil, fileError(r.file, "member %q inflates past its declared %d bytes or fails its CRC-32 check", zf.Name, zf.UncompressedSize64)
	}
	return buf, nil
}

// stored returns a stored member's bytes, aliasing the archive.
func (r *torchZip) stored(zf *zip.File) ([]byte, error) {
	off, err := zf.DataOffset()
	if err != nil {
		return nil, &Error{File: r.file, Rule: fmt.Sprintf("member %q has a bad local header", zf.Name), Err: err}
	}
	size := zf.UncompressedSize64
	if zf.CompressedSize64 != size {
		return nil, fileError(r.file, "stored member %q is %d bytes but declares %d", zf.Name, zf.CompressedSize64, size)
	}
	if off < 0 || off > int64(len(r.data)) || size > uint64(int64(len(r.data))-off) {
		return nil, fileError(r.file, "member %q's %d bytes lie past the end of the file (truncated)", zf.Name, size)
	}
	return r.data[off : off+int64(size) : off+int64(size)], nil
}

// unpickle scans the pickle, then unpickles it with the class table and
// the storage loader of this archive, unless the scan says that would take
// more than the archive's limit of memory. A panic inside the unpickler (a
// malformed stream it does not check) becomes an *Error.
func (r *torchZip) unpickle() (root any, err error) {
	name := r.prefix + "/data.pkl"
	pkl, err := r.read(r.members[name])
	if err != nil {
		return nil, err
	}
	holds, rule := scanPickle(pkl)
	if rule != "" {
		return nil, fileError(r.file, "%s: %s", name, rule)
	}
	if r.limit > 0 && holds > r.limit {
		return nil, &Error{File: r.file, Need: holds, NeedFor: "unpickling " + name,
			Rule: fmt.Sprintf("unpickling %s takes about %s of memory, more than the %s reading this file may take", name, engine.FormatBytes(holds), engine.FormatBytes(r.limit))}
	}
	u := pickle.NewUnpickler(bytes.NewReader(pkl))
	u.FindClass = r.findClass
	u.PersistentLoad = r.persistentLoad
	defer func() {
		if p := recover(); p != nil {
			root, err = nil, &Error{File: r.file, Rule: name + " is not a valid pickle", Err: fmt.Errorf("%v", p)}
		}
	}()
	root, err = u.Load()
	if err != nil {
		var de *Error
		if errors.As(err, &de) {
			return nil, de
		}
		return nil, &Error{File: r.file, Rule: name + " is not a valid pickle", Err: err}
	}
	return root, nil
}

// The classes a .pt pickle may name.
type (
	// rebuildTensor is torch._utils._rebuild_tensor_v2 (v3 adds the dtype).
	rebuildTensor struct{ v3 bool }
	// rebuildParameter is torch._utils._rebuild_parameter: the tensor itself.
	rebuildParameter struct{}
	// storageClass is a torch.*Storage class, named in a storage's persistent
	// id; dtype is invalid for storages sampviz does not read, and bytes
	// (UntypedStorage) counts its size in bytes.
	storageClass struct {
		name, dtypeName string
		dtype           engine.DType
		bytes           bool
	}
	// torchDType is a torch.dtype, an argument of _rebuild_tensor_v3.
	torchDType struct {
		name  string
		dtype engine.DType
	}
)

// ptGlobals is the class table: module.name → what it stands for. Every
// other global is refused. collections.OrderedDict is gopickle's own.
var ptGlobals = func() map[string]any {
	m := map[string]any{
		"torch._utils._rebuild_tensor_v2": rebuildTensor{},
		"torch._utils._rebuild_tensor_v3": rebuildTensor{v3: true},
		"torch._utils._rebuild_parameter": rebuildParameter{},
		"collections.OrderedDict":         nil,
		"torch.UntypedStorage":            &storageClass{name: "UntypedStorage", dtypeName: "uint8", dtype: engine.U8, bytes: true},
	}
	for _, s := range []struct {
		storage, dtype string
		d              engine.DType
	}{
		{"FloatStorage", "float32", engine.F32}, {"DoubleStorage", "float64", engine.F64},
		{"HalfStorage", "float16", engine.F16}, {"BFloat16Storage", "bfloat16", engine.BF16},
		{"IntStorage", "int32", engine.I32}, {"LongStorage", "int64", engine.I64},
		{"ByteStorage", "uint8", engine.U8}, {"BoolStorage", "bool", engine.Bool},
		{"CharStorage", "int8", 0}, {"ShortStorage", "int16", 0},
		{"ComplexFloatStorage", "complex64", 0}, {"ComplexDoubleStorage", "complex128", 0},
	} {
		m["torch."+s.storage] = &storageClass{name: s.storage, dtypeName: s.dtype, dtype: s.d}
		m["torch."+s.dtype] = torchDType{name: s.dtype, dtype: s.d}
	}
	return m
}()

// refusal is the sentence for a global outside the class table.
func refusal(global string) string {
	switch global {
	case "torch._tensor._rebuild_from_type_v2":
		return fmt.Sprintf("the pickle holds a tensor subclass or a tensor with attributes (%s): save plain tensors (t.detach().clone())", global)
	}
	return fmt.Sprintf("the pickle asks for %s, but %s; it was refused and nothing in it was run", global, ptPlain)
}

func (r *torchZip) findClass(module, name string) (any, error) {
	global := module + "." + name
	if c, ok := ptGlobals[global]; ok && c != nil {
		return c, nil
	}
	return nil, fileError(r.file, "%s", refusal(global))
}

// ptStorage is a storage named by a persistent id; its bytes are found when
// a tensor is resolved.
type ptStorage struct {
	key   string
	class *storageClass
	numel int
	// span is the member's bytes in the archive once resolved.
	data       []byte
	begin, end int64
}

// persistentLoad resolves ('storage', class, key, location, numel).
func (r *torchZip) persistentLoad(pid any) (any, error) {
	t, ok := pid.(*types.Tuple)
	if !ok || t.Len() < 5 {
		return nil, fileError(r.file, "the pickle names a persistent object %s, not a tensor storage ('storage', class, key, location, size)", ptKind(pid))
	}
	kind, _ := t.Get(0).(string)
	class, okClass := t.Get(1).(*storageClass)
	key, okKey := t.Get(2).(string)
	numel, okNumel := t.Get(4).(int)
	if kind != "storage" || !okClass || !okKey || !okNumel || numel < 0 {
		return nil, fileError(r.file, "the pickle names a persistent object that is not a tensor storage ('storage', class, key, location, size)")
	}
	if s := r.storages[key]; s != nil {
		if s.class != class || s.numel != numel {
			return nil, fileError(r.file, "storage %q is named as %d of %s and as %d of %s", key, s.numel, s.class.name, numel, class.name)
		}
		return s, nil
	}
	s := &ptStorage{key: key, class: class, numel: numel}
	r.storages[key] = s
	return s, nil
}

// ptTensor is what _rebuild_tensor_v2 returns: a view of a storage, checked
// when it gets its name.
type ptTensor struct {
	storage *ptStorage
	offset  int
	size    []int
	stride  []int
	dtype   engine.DType
	dname   string // the torch dtype's name, for messages
}

func (rt rebuildTensor) Call(args ...any) (any, error) {
	want := 6
	if rt.v3 {
		want = 7
	}
	if len(args) < want {
		return nil, fmt.Errorf("_rebuild_tensor takes %d arguments, got %d", want, len(args))
	}
	st, ok := args[0].(*ptStorage)
	if !ok {
		return nil, fmt.Errorf("_rebuild_tensor's storage is %s", ptKind(args[0]))
	}
	offset, okOffset := args[1].(int)
	size, errSize := ptInts(args[2])
	stride, errStride := ptInts(args[3])
	if !okOffset || errSize != nil || errStride != nil {
		return nil, fmt.Errorf("_rebuild_tensor's offset, size and stride are not integers")
	}
	t := &ptTensor{storage: st, offset: offset, size: size, stride: stride, dtype: st.class.dtype, dname: "torch." + st.class.dtypeName}
	if rt.v3 {
		d, ok := args[6].(torchDType)
		if !ok {
			return nil, fmt.Errorf("_rebuild_tensor_v3's dtype is %s", ptKind(args[6]))
		}
		t.dtype, t.dname = d.dtype, "torch."+d.name
	}
	return t, nil
}

func (rebuildParameter) Call(args ...any) (any, error) {
	if len(args) < 1 {
		return nil, errors.New("_rebuild_parameter takes the tensor")
	}
	t, ok := args[0].(*ptTensor)
	if !ok {
		return nil, fmt.Errorf("_rebuild_parameter's data is %s", ptKind(args[0]))
	}
	return t, nil
}

// ptInts reads a tuple of ints (a size or a stride).
func ptInts(v any) ([]int, error) {
	t, ok := v.(*types.Tuple)
	if !ok || t.Len() > maxDims {
		return nil, errors.New("not a tuple of at most 64 ints")
	}
	out := make([]int, t.Len())
	for i := range out {
		n, ok := t.Get(i).(int)
		if !ok {
			return nil, errors.New("not a tuple of ints")
		}
		out[i] = n
	}
	return out, nil
}

// ptNamed is a tensor with the name the pickle's containers give it.
type ptNamed struct {
	name string
	t    *ptTensor
}

// walk names the tensors of a dict, recursing into nested dicts; the
// root's __metadata__ goes to f.Meta and plain values to f.Notices.
func (r *torchZip) walk(v any, prefix string, depth int, f *File, seen map[any]bool) ([]ptNamed, error) {
	if depth > maxPTDepth {
		return nil, fileError(r.file, "dicts nest more than %d deep", maxPTDepth)
	}
	if seen[v] {
		return nil, fileError(r.file, "the pickle holds one dict twice (under %q); a dump's names must form a tree", prefix)
	}
	seen[v] = true
	var out []ptNamed
	var err error
	ptEntries(v, func(key, value any) bool {
		k, ok := key.(string)
		if !ok {
			err = fileError(r.file, "a dict key is %s; the names of a dump are strings", ptKind(key))
			return false
		}
		name := k
		if prefix != "" {
			name = prefix + "." + k
		}
		if depth == 0 && k == metadataKey {
			err = r.metadata(value, f)
			return err == nil
		}
		switch x := value.(type) {
		case *ptTensor:
			out = append(out, ptNamed{name, x})
		case *types.Dict, *types.OrderedDict:
			var sub []ptNamed
			sub, err = r.walk(x, name, depth+1, f, seen)
			out = append(out, sub...)
		case *types.List, *types.Tuple:
			if ptHoldsTensor(x) {
				err = tensorError(r.file, name, "is a list of tensors; a dump names each tensor, so save a dict of name → tensor")
			} else {
				f.Notices = append(f.Notices, fmt.Sprintf("ignored entry %q: %s, not a tensor", name, ptKind(x)))
			}
		case nil, bool, int, float64, string, *big.Int, []byte:
			f.Notices = append(f.Notices, fmt.Sprintf("ignored entry %q: %s, not a tensor", name, ptKind(x)))
		default:
			err = tensorError(r.file, name, "holds %s, but %s", ptKind(x), ptPlain)
		}
		return err == nil
	})
	return out, err
}

// metadata reads the root's __metadata__: a dict of strings (numbers and
// booleans are written as text).
func (r *torchZip) metadata(v any, f *File) error {
	var err error
	ok := ptEntries(v, func(key, value any) bool {
		k, isString := key.(string)
		var s string
		switch x := value.(type) {
		case string:
			s = x
		case int:
			s = strconv.Itoa(x)
		case float64:
			s = engine.FormatFloat(x)
		case bool:
			s = strconv.FormatBool(x)
		default:
			isString = false
		}
		if !isString {
			err = fileError(r.file, "%s must map strings to strings, but holds %s → %s", metadataKey, ptKind(key), ptKind(value))
			return false
		}
		f.Meta[k] = s
		return true
	})
	if !ok && err == nil {
		err = fileError(r.file, "%s is %s, not a dict of strings", metadataKey, ptKind(v))
	}
	return err
}

// ptEntries calls fn on each entry of a dict or OrderedDict in order until
// fn returns false, and reports whether v is one.
func ptEntries(v any, fn func(key, value any) bool) bool {
	switch d := v.(type) {
	case *types.Dict:
		for _, e := range *d {
			if !fn(e.Key, e.Value) {
				break
			}
		}
	case *types.OrderedDict:
		for el := d.List.Front(); el != nil; el = el.Next() {
			e := el.Value.(*types.OrderedDictEntry)
			if !fn(e.Key, e.Value) {
				break
			}
		}
	default:
		return false
	}
	return true
}

// ptHoldsTensor reports whether a list or tuple holds a tensor within
// maxPTDepth levels. It looks at each list or tuple once, level by level: a
// list may hold itself, and a pickle of a few hundred bytes can make one
// list appear 64 times in each of its own items, a tree of 64^17 lists to a
// walk that does not remember where it has been.
func ptHoldsTensor(v any) bool {
	seen := map[any]bool{}
	level := []any{v}
	for depth := 0; depth <= maxPTDepth && len(level) > 0; depth++ {
		var next []any
		for _, x := range level {
			var items []any
			switch c := x.(type) {
			case *ptTensor:
				return true
			case *types.List:
				items = *c
			case *types.Tuple:
				items = *c
			default:
				continue
			}
			if !seen[x] {
				seen[x] = true
				next = append(next, items...)
			}
		}
		level = next
	}
	return false
}

// ptKind names a pickled value's kind for messages.
func ptKind(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case bool:
		return "a bool"
	case int, *big.Int:
		return "an int"
	case float64:
		return "a float"
	case string:
		return "a str"
	case []byte:
		return "bytes"
	case *types.List:
		return fmt.Sprintf("a list of %d", len(*x))
	case *types.Tuple:
		return fmt.Sprintf("a tuple of %d", len(*x))
	case *types.Dict, *types.OrderedDict:
		return "a dict"
	case *ptTensor:
		return "a tensor"
	case *ptStorage, *storageClass:
		return "a bare storage"
	}
	return fmt.Sprintf("an object of a class outside the table (%T)", v)
}

// tensor checks a named tensor against its storage and returns it,
// aliasing the storage's bytes.
func (r *torchZip) tensor(name string, t *ptTensor) (*engine.Tensor, error) {
	if t.dtype.Size() == 0 {
		return nil, tensorError(r.file, name, "has dtype %s, which sampviz does not read (it reads %s)", t.dname, readableDTypes)
	}
	data, err := r.storageBytes(name, t.storage)
	if err != nil {
		return nil, err
	}
	if len(t.size) != len(t.stride) {
		return nil, tensorError(r.file, name, "has %d sizes but %d strides", len(t.size), len(t.stride))
	}
	shape := make([]int64, len(t.size))
	for i, d := range t.size {
		shape[i] = int64(d)
	}
	need, ok := byteCount(shape, t.dtype.Size())
	if !ok {
		return nil, tensorError(r.file, name, "shape %s of %s is invalid or too large to address", formatShape(shape), t.dtype)
	}
	if want := contiguousStrides(t.size); need > 0 && !stridesMatch(t.size, t.stride, want) {
		return nil, tensorError(r.file, name, "is not contiguous (stride %s for shape %s, want %s): save t.contiguous()", engine.FormatShape(t.stride), engine.FormatShape(t.size), engine.FormatShape(want))
	}
	esize := t.dtype.Size()
	if t.offset < 0 || t.offset > len(data)/esize || need > len(data)-t.offset*esize {
		return nil, tensorError(r.file, name, "lies past the end of its storage %q: offset %d and %d bytes of %s, but the storage holds %d bytes", t.storage.key, t.offset, need, t.dtype, len(data))
	}
	begin := t.offset * esize
	return &engine.Tensor{Name: name, DType: t.dtype, Shape: intShape(shape), Data: data[begin : begin+need : begin+need]}, nil
}

// contiguousStrides returns the row-major strides of size.
func contiguousStrides(size []int) []int {
	out := make([]int, len(size))
	s := 1
	for i := len(size) - 1; i >= 0; i-- {
		out[i] = s
		s *= max(size[i], 1)
	}
	return out
}

// stridesMatch compares strides where they matter: a dimension of size 1
// may have any stride.
func stridesMatch(size, got, want []int) bool {
	for i := range size {
		if size[i] != 1 && got[i] != want[i] {
			return false
		}
	}
	return true
}

// storageBytes finds the member that holds a storage and checks it holds
// exactly the storage's bytes.
func (r *torchZip) storageBytes(tensor string, s *ptStorage) ([]byte, error) {
	if s.data != nil || s.end > 0 {
		return s.data, nil
	}
	member := r.prefix + "/data/" + s.key
	zf := r.members[member]
	if zf == nil {
		return nil, tensorError(r.file, tensor, "its storage %q has no member %s in the archive", s.key, member)
	}
	if zf.Method != zip.Store {
		return nil, tensorError(r.file, tensor, "its storage member %s is compressed (method %d); torch.save stores storages uncompressed", member, zf.Method)
	}
	data, err := r.stored(zf)
	if err != nil {
		var de *Error
		if errors.As(err, &de) {
			de.Tensor = tensor
		}
		return nil, err
	}
	esize := s.class.dtype.Size()
	if s.class.bytes || esize == 0 {
		esize = 1 // UntypedStorage counts bytes; unread dtypes are refused by the tensor
	}
	if need, ok := byteCount([]int64{int64(s.numel)}, esize); !ok || need != len(data) {
		return nil, tensorError(r.file, tensor, "its storage %q holds %d bytes, but %d elements of %s need %d (truncated or padded)", s.key, len(data), s.numel, s.class.name, s.numel*esize)
	}
	off, _ := zf.DataOffset() // checked by stored
	s.data, s.begin, s.end = data, off, off+int64(len(data))
	return data, nil
}

// checkStorageOverlap refuses two storages whose members share bytes of the
// archive (a forged central directory): each storage is its own memory.
func (r *torchZip) checkStorageOverlap() error {
	var spans []*ptStorage
	for _, s := range r.storages {
		if s.end > s.begin {
			spans = append(spans, s)
		}
	}
	sort.Slice(spans, func(i, j int) bool {
		a, b := spans[i], spans[j]
		return a.begin < b.begin || a.begin == b.begin && a.key < b.key
	})
	for i := 1; i < len(spans); i++ {
		a, b := spans[i-1], spans[i]
		if b.begin < a.end {
			return fileError(r.file, "storages %q and %q overlap in the archive (bytes [%d, %d) and [%d, %d))", a.key, b.key, a.begin, a.end, b.begin, b.end)
		}
	}
	return nil
}

// pickleArg is how an opcode's argument is laid out in the stream.
type pickleArg uint8

const (
	argNone  pickleArg = iota
	argLine            // text up to '\n'
	argLines           // two lines (GLOBAL: module, name)
	argFixed           // n bytes
	argLen1            // a 1-byte length, then that many bytes
	argLen4            // a 4-byte little-endian length, then that many bytes
	argLen8            // an 8-byte little-endian length, then that many bytes
	argFrame           // FRAME: an 8-byte length of the frame that follows
)

// What gopickle's unpickler holds, measured (v0.2.0) and rounded up by
// about half: a value on its stack, with the stack's growth and the slot of
// the container it ends in; the containers and memo entries beside it; and
// an open MARK, which starts a new stack of its own. A text argument is held
// twice (the bytes read, then the string).
const (
	pickleValueBytes = 96
	pickleTupleBytes = 128
	pickleListBytes  = 192
	pickleDictBytes  = 256
	pickleMemoBytes  = 64
	pickleMarkBytes  = 384
)

// maxPickleNesting bounds the MARKs a pickle may leave open: each opens a
// container being built, and a dump's containers nest a few levels (a dict
// of tensors, a tuple of sizes), while each open MARK takes
// pickleMarkBytes of memory for one byte of file.
const maxPickleNesting = 1000

// pickleOps are the opcodes a .pt pickle may use: what torch.save writes
// for tensors in any pickle protocol, and plain containers and scalars.
// holds is the memory the unpickler takes for the opcode beside its
// argument's bytes.
var pickleOps = map[byte]pickleOp{
	0x80: {"PROTO", argFixed, 1, 0}, 0x95: {"FRAME", argFrame, 8, 0}, '.': {"STOP", argNone, 0, 0},
	'(': {"MARK", argNone, 0, 0}, '0': {"POP", argNone, 0, 0}, '1': {"POP_MARK", argNone, 0, 0}, '2': {"DUP", argNone, 0, pickleValueBytes},
	'N': {"NONE", argNone, 0, pickleValueBytes}, 0x88: {"NEWTRUE", argNone, 0, pickleValueBytes}, 0x89: {"NEWFALSE", argNone, 0, pickleValueBytes},
	'I': {"INT", argLine, 0, pickleValueBytes}, 'J': {"BININT", argFixed, 4, pickleValueBytes}, 'K': {"BININT1", argFixed, 1, pickleValueBytes}, 'M': {"BININT2", argFixed, 2, pickleValueBytes},
	'L': {"LONG", argLine, 0, pickleValueBytes}, 0x8a: {"LONG1", argLen1, 0, pickleValueBytes}, 0x8b: {"LONG4", argLen4, 0, pickleValueBytes},
	'F': {"FLOAT", argLine, 0, pickleValueBytes}, 'G': {"BINFLOAT", argFixed, 8, pickleValueBytes},
	'S': {"STRING", argLine, 0, pickleValueBytes}, 'T': {"BINSTRING", argLen4, 0, pickleValueBytes}, 'U': {"SHORT_BINSTRING", argLen1, 0, pickleValueBytes},
	'B': {"BINBYTES", argLen4, 0, pickleValueBytes}, 'C': {"SHORT_BINBYTES", argLen1, 0, pickleValueBytes}, 0x8e: {"BINBYTES8", argLen8, 0, pickleValueBytes},
	'V': {"UNICODE", argLine, 0, pickleValueBytes}, 'X': {"BINUNICODE", argLen4, 0, pickleValueBytes}, 0x8c: {"SHORT_BINUNICODE", argLen1, 0, pickleValueBytes}, 0x8d: {"BINUNICODE8", argLen8, 0, pickleValueBytes},
	')': {"EMPTY_TUPLE", argNone, 0, pickleTupleBytes}, 't': {"TUPLE", argNone, 0, pickleValueBytes}, 0x85: {"TUPLE1", argNone, 0, pickleValueBytes}, 0x86: {"TUPLE2", argNone, 0, pickleValueBytes}, 0x87: {"TUPLE3", argNone, 0, pickleValueBytes},
	']': {"EMPTY_LIST", argNone, 0, pickleListBytes}, 'a': {"APPEND", argNone, 0, 0}, 'e': {"APPENDS", argNone, 0, 0}, 'l': {"LIST", argNone, 0, pickleListBytes},
	'}': {"EMPTY_DICT", argNone, 0, pickleDictBytes}, 'd': {"DICT", argNone, 0, pickleDictBytes}, 's': {"SETITEM", argNone, 0, 0}, 'u': {"SETITEMS", argNone, 0, 0},
	'c': {"GLOBAL", argLines, 0, pickleValueBytes}, 0x93: {"STACK_GLOBAL", argNone, 0, pickleValueBytes}, 'R': {"REDUCE", argNone, 0, pickleValueBytes}, 'b': {"BUILD", argNone, 0, 0},
	'p': {"PUT", argLine, 0, pickleMemoBytes}, 'q': {"BINPUT", argFixed, 1, pickleMemoBytes}, 'r': {"LONG_BINPUT", argFixed, 4, pickleMemoBytes}, 0x94: {"MEMOIZE", argNone, 0, pickleMemoBytes},
	'g': {"GET", argLine, 0, pickleValueBytes}, 'h': {"BINGET", argFixed, 1, pickleValueBytes}, 'j': {"LONG_BINGET", argFixed, 4, pickleValueBytes},
	'P': {"PERSID", argLine, 0, pickleValueBytes}, 'Q': {"BINPERSID", argNone, 0, pickleValueBytes},
}

// pickleOp is an opcode's entry in pickleOps.
type pickleOp struct {
	name  string
	arg   pickleArg
	n     int
	holds int64
}

// pickleOpsByByte is pickleOps indexed by opcode, for the scan's loop.
var pickleOpsByByte = func() (t [256]*pickleOp) {
	for b, op := range pickleOps {
		t[b] = &op
	}
	return t
}()

// closesMark are the opcodes that close the last open MARK.
var closesMark = [256]bool{'1': true, 't': true, 'l': true, 'd': true, 'e': true, 'u': true}

// refusedOps name the opcodes a .pt dump never needs, for the refusal.
var refusedOps = map[byte]string{
	'i': "INST (builds an object)", 'o': "OBJ (builds an object)", 0x81: "NEWOBJ (builds an object)", 0x92: "NEWOBJ_EX (builds an object)",
	0x82: "EXT1 (an extension code)", 0x83: "EXT2 (an extension code)", 0x84: "EXT4 (an extension code)",
	0x8f: "EMPTY_SET", 0x90: "ADDITEMS", 0x91: "FROZENSET", 0x96: "BYTEARRAY8",
	0x97: "NEXT_BUFFER (out-of-band data)", 0x98: "READONLY_BUFFER (out-of-band data)",
}

// scanPickle walks a pickle's opcodes before anything is unpickled: every
// opcode must be one of pickleOps, every length must fit in the bytes that
// follow it (so no allocation exceeds the pickle), every GLOBAL must be in
// the class table, at most maxPickleNesting MARKs may be open, and the
// stream must reach STOP. It returns the memory unpickling it takes at most
// (the pickle's bytes, then pickleOps' holds and the open MARKs), and the
// broken rule, or "".
func scanPickle(p []byte) (holds int64, rule string) {
	holds = int64(len(p))
	var open, deepest int64 // MARKs
	for i := 0; i < len(p); {
		at, op := i, p[i]
		i++
		info := pickleOpsByByte[op]
		if info == nil {
			if name, refused := refusedOps[op]; refused {
				return 0, fmt.Sprintf("the pickle uses opcode %s at byte %d, but %s", name, at, ptPlain)
			}
			return 0, fmt.Sprintf("the pickle holds byte 0x%02x at byte %d, which is no pickle opcode a .pt dump uses", op, at)
		}
		holds += info.holds
		switch {
		case op == '(':
			if open++; open > maxPickleNesting {
				return 0, fmt.Sprintf("the pickle nests MARKs more than %d deep (at byte %d), but a dump's containers nest a few levels", maxPickleNesting, at)
			}
			deepest = max(deepest, open)
		case closesMark[op] && open > 0:
			open--
		}
		if info.arg == argNone {
			if op == '.' {
				return holds + deepest*pickleMarkBytes, ""
			}
			continue
		}
		need := func(n uint64) string {
			if n > uint64(len(p)-i) {
				return fmt.Sprintf("the pickle's %s at byte %d needs %d bytes, but only %d follow (truncated)", info.name, at, n, len(p)-i)
			}
			return ""
		}
		switch info.arg {
		case argFixed:
			if e := need(uint64(info.n)); e != "" {
				return 0, e
			}
			if op == 0x80 && p[i] > pickle.HighestProtocol {
				return 0, fmt.Sprintf("the pickle uses protocol %d; sampviz reads protocols 0 to %d", p[i], pickle.HighestProtocol)
			}
			i += info.n
		case argLine, argLines:
			lines := 1
			if info.arg == argLines {
				lines = 2
			}
			start := i
			for range lines {
				nl := bytes.IndexByte(p[i:], '\n')
				if nl < 0 {
					return 0, fmt.Sprintf("the pickle's %s at byte %d has no end of line (truncated)", info.name, at)
				}
				i += nl + 1
			}
			holds += 2 * int64(i-start)
			if op == 'c' {
				module, name, _ := strings.Cut(strings.TrimSuffix(string(p[start:i]), "\n"), "\n")
				if _, known := ptGlobals[module+"."+name]; !known {
					return 0, refusal(module + "." + name)
				}
			}
		case argLen1, argLen4, argLen8, argFrame:
			width := 8
			switch info.arg {
			case argLen1:
				width = 1
			case argLen4:
				width = 4
			}
			if e := need(uint64(width)); e != "" {
				return 0, e
			}
			var n uint64
			switch width {
			case 1:
				n = uint64(p[i])
			case 4:
				n = uint64(binary.LittleEndian.Uint32(p[i:]))
			case 8:
				n = binary.LittleEndian.Uint64(p[i:])
			}
			i += width
			if e := need(n); e != "" {
				return 0, e
			}
			if info.arg == argFrame { // a frame's bytes are opcodes, scanned as they come, and read whole
				holds += int64(n)
			} else {
				holds += 2 * int64(n)
				i += int(n)
			}
		}
	}
	return 0, "the pickle ends before its STOP opcode (truncated)"
}
