package dump

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nlpodyssey/gopickle/pickle"

	"github.com/sampviz/sampviz/engine"
)

// The .pt fixtures under testdata/ were written by torch.save (torch 1.13,
// gen_torch.py); the refused files are built here, byte by byte, with a
// small pickle writer that lays tensors out as torch.save does.

func TestTorchSaveFixtures(t *testing.T) {
	type want struct {
		name  string
		dtype engine.DType
		shape []int
		value func(i int) float64
	}
	formula := func(i int) float64 { return fixtureLogits(i/5, i%5) }
	tests := []struct {
		file    string
		tensors []want
		meta    map[string]string
		notices int
	}{
		{"torch_dict.pt", []want{
			{"logits", engine.F32, []int{2, 5}, formula},
			{"temperature", engine.F32, []int{}, func(int) float64 { return 0.5 }},
			{"top_k", engine.I64, []int{2}, func(i int) float64 { return []float64{3, 0}[i] }},
			{"top_p", engine.F64, []int{2}, func(i int) float64 { return []float64{0.9, 1}[i] }},
			{"probs@eager", engine.F16, []int{2, 5}, nil},
			{"extra.tokens", engine.I32, []int{2}, func(i int) float64 { return []float64{1, 4}[i] }},
			{"extra.mask", engine.Bool, []int{3}, func(i int) float64 { return []float64{1, 0, 1}[i] }},
			{"extra.ids", engine.U8, []int{3}, func(i int) float64 { return []float64{0, 255, 17}[i] }},
		}, map[string]string{"op": "renorm", "source": "torch.save"}, 2},
		{"torch_logits_bf16.pt", []want{{"logits", engine.BF16, []int{2, 5}, formula}}, nil, 0},
		{"torch_protocol4.pt", []want{{"logits", engine.F16, []int{2, 5}, formula}}, nil, 0},
		{"torch_offset.pt", []want{{"logits", engine.F64, []int{2, 5}, func(i int) float64 { return float64(i+2)/4 - 1.125 }}}, nil, 0},
		{"torch_parameter.pt", []want{{"logits", engine.F32, []int{2, 5}, formula}}, nil, 0},
		{"torch_state_dict.pt", []want{
			{"weight", engine.F32, []int{2, 5}, formula},
			{"bias", engine.F32, []int{2}, func(i int) float64 { return []float64{0.25, -0.5}[i] }},
		}, nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			f, err := Open(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.Format != PT {
				t.Errorf("format %q, want pt", f.Format)
			}
			if len(f.Tensors) != len(tc.tensors) {
				t.Fatalf("%d tensors, want %d", len(f.Tensors), len(tc.tensors))
			}
			for i, w := range tc.tensors {
				got := f.Tensors[i]
				if got.Name != w.name || got.DType != w.dtype || !slices.Equal(got.Shape, w.shape) {
					t.Errorf("tensor %d = %s %s %v, want %s %s %v", i, got.Name, got.DType, got.Shape, w.name, w.dtype, w.shape)
					continue
				}
				for j := 0; w.value != nil && j < got.NumElements(); j++ {
					if g, e := got.Float(j), w.value(j); math.Abs(g-e) > 1e-15 && float64(float32(e)) != g {
						t.Errorf("%s[%d] = %v, want %v", w.name, j, g, e)
					}
				}
			}
			for k, v := range tc.meta {
				if f.Meta[k] != v {
					t.Errorf("meta[%q] = %q, want %q", k, f.Meta[k], v)
				}
			}
			if len(f.Notices) != tc.notices {
				t.Errorf("notices %q, want %d", f.Notices, tc.notices)
			}
		})
	}
	run, f, err := Load(filepath.Join("testdata", "torch_dict.pt"), engine.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if run.Op != engine.OpRenorm || run.Params.Temperature[1] != 0.5 || run.Params.TopK[0] != 3 {
		t.Errorf("run op %s, params %+v", run.Op, run.Params)
	}
}

func TestTorchSaveRefusedFixtures(t *testing.T) {
	for file, want := range map[string]string{
		"torch_noncontiguous.pt": `tensor "logits": is not contiguous (stride [1, 2] for shape [2, 5], want [5, 1])`,
		"torch_int8.pt":          `tensor "logits": has dtype torch.int8, which sampviz does not read`,
		"torch_list.pt":          "holds a list of 1; a .pt dump holds one tensor (read as logits) or a dict of name → tensor",
	} {
		t.Run(file, func(t *testing.T) {
			_, err := Open(filepath.Join("testdata", file))
			checkDumpError(t, err, file, want)
		})
	}
}

// checkDumpError wants a *Error whose text names file and holds want.
func checkDumpError(t *testing.T, err error, file, want string) {
	t.Helper()
	var de *Error
	if !errors.As(err, &de) {
		t.Fatalf("error %v (%T), want *Error", err, err)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, file+": ") || !strings.Contains(msg, want) {
		t.Errorf("error %q, want %q from %s", msg, want, file)
	}
}

// pickler writes pickle opcodes as torch.save's pickler (protocol 2) does.
type pickler struct{ bytes.Buffer }

func (p *pickler) op(b ...byte) *pickler { p.Write(b); return p }
func (p *pickler) str(s string) *pickler {
	p.WriteByte('X')
	binary.Write(p, binary.LittleEndian, uint32(len(s)))
	p.WriteString(s)
	return p
}
func (p *pickler) int(n int) *pickler {
	p.WriteByte('J')
	binary.Write(p, binary.LittleEndian, int32(n))
	return p
}
func (p *pickler) ints(v ...int) *pickler {
	p.op('(')
	for _, n := range v {
		p.int(n)
	}
	return p.op('t')
}
func (p *pickler) global(module, name string) *pickler {
	return p.op('c').op([]byte(module + "\n" + name + "\n")...)
}

// ptTensorSpec is one tensor of a pickled dict.
type ptTensorSpec struct {
	name, class, key     string
	numel, offset        int
	size, stride         []int
	location, rebuildTag string
}

// tensorDict pickles {name: tensor, ...} as torch.save lays it out.
func tensorDict(specs ...ptTensorSpec) []byte {
	p := &pickler{}
	p.op(0x80, 2, '}', '(')
	for _, s := range specs {
		if s.rebuildTag == "" {
			s.rebuildTag = "_rebuild_tensor_v2"
		}
		if s.location == "" {
			s.location = "cpu"
		}
		p.str(s.name).global("torch._utils", s.rebuildTag).op('(')
		p.op('(').str("storage").global("torch", s.class).str(s.key).str(s.location).int(s.numel).op('t', 'Q')
		p.int(s.offset).ints(s.size...).ints(s.stride...).op(0x89)
		p.global("collections", "OrderedDict").op(')', 'R', 't', 'R')
	}
	return p.op('u', '.').Bytes()
}

type ptMember struct {
	name   string
	body   []byte
	method uint16
}

// ptZip builds a zip archive of stored (or deflated) members in order.
func ptZip(tb testing.TB, members ...ptMember) []byte {
	tb.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, m := range members {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: m.name, Method: m.method})
		if err != nil {
			tb.Fatal(err)
		}
		w.Write(m.body)
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

// f32Storage is n float32 values 0, 1, 2, ... as storage bytes.
func f32Storage(n int) []byte {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i)
	}
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, v)
	return b.Bytes()
}

func TestPTRefused(t *testing.T) {
	logits := ptTensorSpec{name: "logits", class: "FloatStorage", key: "0", numel: 6, size: []int{2, 3}, stride: []int{3, 1}}
	good := tensorDict(logits)
	pkl := func(b []byte) ptMember { return ptMember{name: "archive/data.pkl", body: b} }
	store0 := ptMember{name: "archive/data/0", body: f32Storage(6)}
	// os.system("echo pwned") as a GLOBAL, then as protocol 4's STACK_GLOBAL.
	system := (&pickler{}).op(0x80, 2).global("os", "system").str("echo pwned").op(0x85, 'R', '.').Bytes()
	stackSystem := (&pickler{}).op(0x80, 4, 0x8c, 2).op([]byte("os")...).op(0x8c, 6).op([]byte("system")...).op(0x93).str("echo pwned").op(0x85, 'R', '.').Bytes()
	unknownClass := (&pickler{}).op(0x80, 2).global("__main__", "Evil").op(')', 'R', '.').Bytes()
	reconstructor := (&pickler{}).op(0x80, 2).global("copy_reg", "_reconstructor").op(')', 'R', '.').Bytes()
	newobj := (&pickler{}).op(0x80, 2).global("torch._utils", "_rebuild_parameter").op(')', 0x81, '.').Bytes()
	subclass := (&pickler{}).op(0x80, 2).global("torch._tensor", "_rebuild_from_type_v2").op(')', 'R', '.').Bytes()
	oddItems := (&pickler{}).op(0x80, 2, '}', '(').str("a").op('u', '.').Bytes()
	hugeFrame := append((&pickler{}).op(0x80, 4, 0x95).Bytes(), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, '.')
	hugeUnicode := append((&pickler{}).op(0x80, 4, 0x8d).Bytes(), 0, 0, 0, 0, 0, 0, 0, 0x40, '.')
	noStop := good[:len(good)-1]
	past := logits
	past.offset = 2
	wide := logits
	wide.numel = 8
	two := []ptTensorSpec{logits, {name: "probs", class: "FloatStorage", key: "1", numel: 6, size: []int{2, 3}, stride: []int{3, 1}}}

	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"GLOBAL os.system", ptZip(t, pkl(system), store0), "the pickle asks for os.system, but a .pt dump may hold only tensors and plain containers"},
		{"STACK_GLOBAL os.system", ptZip(t, pkl(stackSystem), store0), "the pickle asks for os.system, but"},
		{"reduce of an unknown class", ptZip(t, pkl(unknownClass)), "the pickle asks for __main__.Evil"},
		{"copy_reg reconstructor", ptZip(t, pkl(reconstructor)), "the pickle asks for copy_reg._reconstructor"},
		{"NEWOBJ", ptZip(t, pkl(newobj)), "the pickle uses opcode NEWOBJ (builds an object) at byte"},
		{"tensor subclass", ptZip(t, pkl(subclass)), "a tensor subclass or a tensor with attributes"},
		{"odd SETITEMS", ptZip(t, pkl(oddItems)), "data.pkl is not a valid pickle"},
		{"frame past the end", ptZip(t, pkl(hugeFrame)), "needs 9223372036854775807 bytes, but only 1 follow (truncated)"},
		{"string past the end", ptZip(t, pkl(hugeUnicode)), "BINUNICODE8 at byte 2 needs 4611686018427387904 bytes"},
		{"no STOP", ptZip(t, pkl(noStop), store0), "the pickle ends before its STOP opcode (truncated)"},
		{"truncated storage", ptZip(t, pkl(good), ptMember{name: "archive/data/0", body: f32Storage(5)}), `tensor "logits": its storage "0" holds 20 bytes, but 6 elements of FloatStorage need 24 (truncated or padded)`},
		{"storage shorter than its tensor", ptZip(t, pkl(tensorDict(past)), store0), `tensor "logits": lies past the end of its storage "0": offset 2 and 24 bytes of F32, but the storage holds 24 bytes`},
		{"padded storage", ptZip(t, pkl(tensorDict(wide)), store0), `holds 24 bytes, but 8 elements of FloatStorage need 32`},
		{"missing storage", ptZip(t, pkl(good)), `tensor "logits": its storage "0" has no member archive/data/0 in the archive`},
		{"compressed storage", ptZip(t, pkl(good), ptMember{name: "archive/data/0", body: f32Storage(6), method: zip.Deflate}), "is compressed (method 8)"},
		{"overlapping storages", overlapZip(t, tensorDict(two...)), `storages "0" and "1" overlap in the archive`},
		{"big-endian", ptZip(t, pkl(good), ptMember{name: "archive/byteorder", body: []byte("big")}, store0), `was saved on a "big"-endian machine`},
		{"TorchScript", ptZip(t, pkl(good), ptMember{name: "archive/constants.pkl", body: []byte("x")}), "is a TorchScript archive"},
		{"two pickles", ptZip(t, pkl(good), ptMember{name: "other/data.pkl", body: good}), "holds 2 pickles"},
		{"legacy format", append(slices.Clone(legacyTorchMagic), '.'), "legacy format (_use_new_zipfile_serialization=False)"},
		{"truncated archive", ptZip(t, pkl(good), store0)[:100], "not a valid zip archive"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse("bad.pt", tc.data)
			if err == nil {
				f.Close()
			}
			checkDumpError(t, err, "bad.pt", tc.want)
		})
	}
}

// overlapZip stores a pickle and storages "0" and "1", then forges the
// central directory so that member 1 points at member 0's bytes.
func overlapZip(t *testing.T, pkl []byte) []byte {
	data := ptZip(t, ptMember{name: "archive/data.pkl", body: pkl},
		ptMember{name: "archive/data/0", body: f32Storage(6)}, ptMember{name: "archive/data/1", body: f32Storage(6)})
	// Local headers in member order; the last central directory entry is
	// archive/data/1's, its local header offset the last 4 bytes of its
	// 46-byte fixed part.
	var locals []int
	for i := 0; ; {
		j := bytes.Index(data[i:], []byte("PK\x03\x04"))
		if j < 0 {
			break
		}
		locals = append(locals, i+j)
		i += j + 4
	}
	entry := bytes.LastIndex(data, []byte("PK\x01\x02"))
	binary.LittleEndian.PutUint32(data[entry+42:], uint32(locals[1]))
	return data
}

func TestSGLangDumperFolder(t *testing.T) {
	run, f, err := Load(filepath.Join("testdata", "sglang_dump"), engine.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if run.Op != engine.OpSample {
		t.Errorf("op %s, want sample (logits and tokens)", run.Op)
	}
	names := []string{}
	for _, x := range f.Tensors {
		names = append(names, x.Name+engine.FormatShape(x.Shape))
	}
	if want := []string{"logits[2, 5]", "temperature[2]", "tokens[2]", "top_p[2]"}; !slices.Equal(names, want) {
		t.Errorf("tensors %v, want %v", names, want)
	}
	if got := run.Logits.Float(0); got != fixtureLogits(0, 0)+2 {
		t.Errorf("logits[0, 0] = %v, want forward pass 2's %v", got, fixtureLogits(0, 0)+2)
	}
	if !slices.Equal(run.Params.Temperature, []float64{0.5, 1}) {
		t.Errorf("temperature %v", run.Params.Temperature)
	}
	notices := strings.Join(f.Notices, "\n")
	for _, want := range []string{"read rank 0 of ranks 0, 1", "read forward pass 2, the latest of passes 1, 2", "name=step___dump_index=10.pt: it holds an int, not a tensor"} {
		if !strings.Contains(notices, want) {
			t.Errorf("notices %q lack %q", notices, want)
		}
	}
	if !strings.Contains(f.Meta["source"], "forward pass 2, rank 0") {
		t.Errorf("source %q", f.Meta["source"])
	}
}

func TestSGLangDumperFolderRefused(t *testing.T) {
	copyFixture := func(t *testing.T, dir, from, to string) {
		b, err := os.ReadFile(filepath.Join("testdata", "sglang_dump", from))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, to), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const logitsFile = "forward_pass_id=1___rank=0___name=next_token_logits___dump_index=1.pt"
	t.Run("two files for one tensor", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "dup")
		os.Mkdir(dir, 0o755)
		copyFixture(t, dir, logitsFile, logitsFile)
		copyFixture(t, dir, logitsFile, "forward_pass_id=1___rank=0___name=logits___dump_index=2.pt")
		_, err := Open(dir)
		checkDumpError(t, err, "dup", `tensor "logits": is given by two files`)
	})
	t.Run("a malicious file", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "evil")
		os.Mkdir(dir, 0o755)
		copyFixture(t, dir, logitsFile, logitsFile)
		system := (&pickler{}).op(0x80, 2).global("os", "system").str("echo pwned").op(0x85, 'R', '.').Bytes()
		bad := "forward_pass_id=1___rank=0___name=top_ps___dump_index=2.pt"
		os.WriteFile(filepath.Join(dir, bad), ptZip(t, ptMember{name: "archive/data.pkl", body: system}), 0o644)
		_, err := Open(dir)
		checkDumpError(t, err, bad, "the pickle asks for os.system")
	})
	t.Run("the dumper's parent folder", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "dumps")
		os.MkdirAll(filepath.Join(dir, "sglang_dump_1700000000.5"), 0o755)
		_, err := Open(dir)
		checkDumpError(t, err, "dumps", "holds the dumper's folders sglang_dump_1700000000.5: give one of them")
	})
	t.Run("no dumper files", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "empty")
		os.Mkdir(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "notes.pt"), []byte("x"), 0o644)
		_, err := Open(dir)
		checkDumpError(t, err, "empty", "is a folder without SGLang dumper files")
	})
}

// TestPTSelfList reads a dict whose "history" holds a list that holds
// itself 64 times beside the logits: a walk that does not remember the
// lists it has seen takes 64^17 steps; the list must be ignored with a
// notice, at once.
func TestPTSelfList(t *testing.T) {
	tests := []struct {
		name   string
		build  func(p *pickler) // pushes the value of "history"
		notice string
	}{
		{"a list holding itself 64 times", func(p *pickler) {
			p.op(']', 'q', 0, '(')
			for range 64 {
				p.op('h', 0)
			}
			p.op('e')
		}, `ignored entry "history": a list of 64, not a tensor`},
		{"a tuple of 64 lists, each holding all of them", func(p *pickler) {
			// Lists 1..64 memoized, each given every list, then a tuple of them.
			for i := range 64 {
				p.op(']', 'q', byte(i+1), '0')
			}
			for i := range 64 {
				p.op('h', byte(i+1), '(')
				for j := range 64 {
					p.op('h', byte(j+1))
				}
				p.op('e', '0')
			}
			p.op('(')
			for i := range 64 {
				p.op('h', byte(i+1))
			}
			p.op('t')
		}, `ignored entry "history": a tuple of 64, not a tensor`},
	}
	logits := ptTensorSpec{name: "logits", class: "FloatStorage", key: "0", numel: 6, size: []int{2, 3}, stride: []int{3, 1}}
	good := tensorDict(logits)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := (&pickler{}).op(0x80, 2, '}').str("history")
			tc.build(p)
			p.op('s')
			data := ptZip(t, ptMember{name: "archive/data.pkl", body: append(p.Bytes(), good[3:]...)}, ptMember{name: "archive/data/0", body: f32Storage(6)})
			done := make(chan struct{})
			var f *File
			var err error
			go func() {
				defer close(done)
				f, err = Parse("self.pt", data)
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("reading the file took more than 10 s")
			}
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.Tensor("logits") == nil || !slices.Contains(f.Notices, tc.notice) {
				t.Errorf("tensors %v, notices %q; want logits and %q", f.Tensors, f.Notices, tc.notice)
			}
		})
	}
}

// TestPickleBounds: a pickle whose MARKs nest past maxPickleNesting is
// refused for its shape, whatever the memory, and one whose unpickling
// takes more than the file's limit is refused for its memory (Need set), in
// a few bytes per opcode of memory, before anything is unpickled.
func TestPickleBounds(t *testing.T) {
	flood := func(op byte, n int, tail ...byte) []byte {
		return append(append([]byte{0x80, 2}, bytes.Repeat([]byte{op}, n)...), tail...)
	}
	nested := func(depth int) []byte { // depth tuples, each inside the last
		p := flood('(', depth)
		p = append(p, ')')
		return append(append(p, bytes.Repeat([]byte{'t'}, depth)...), '.')
	}
	tests := []struct {
		name     string
		pickle   []byte
		limit    int64
		want     string // "" when the file is read
		overflow bool   // refused for its memory
	}{
		{"1.5 million MARKs", flood('(', 1_500_000, ')', '.'), 0, "the pickle nests MARKs more than 1000 deep (at byte 1002)", false},
		{"MARKs 1001 deep", nested(1001), 0, "nests MARKs more than 1000 deep", false},
		{"MARKs 1000 deep", nested(1000), 0, "holds a tuple of 1", false},
		{"200000 MARKs, each closed", append(bytes.Repeat([]byte{'(', '1'}, 200_000), 'N', '.'), 0, "holds None", false},
		{"a million dicts in 64 MiB", flood('}', 1_000_000, '.'), 64 << 20, "unpickling archive/data.pkl takes about 24", true},
		{"a million lists in 64 MiB", flood(']', 1_000_000, '.'), 64 << 20, "unpickling archive/data.pkl takes about 18", true},
		{"a million Nones in 64 MiB", flood('N', 1_000_000, '.'), 64 << 20, "unpickling archive/data.pkl takes about 9", true},
		{"200000 Nones in 64 MiB", flood('N', 200_000, '.'), 64 << 20, "holds None", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := ptZip(t, ptMember{name: "archive/data.pkl", body: tc.pickle})
			f, err := ParseWithin("flood.pt", data, tc.limit)
			if err == nil {
				f.Close()
			}
			checkDumpError(t, err, "flood.pt", tc.want)
			var de *Error
			if errors.As(err, &de) && (de.Need > 0) != tc.overflow {
				t.Errorf("Need = %d (%q), want it set: %v", de.Need, de.NeedFor, tc.overflow)
			}
		})
	}
}

// TestPickleMemoryEstimate checks scanPickle's estimate against what
// gopickle's unpickler holds: for a flood of each kind of value, the
// estimate must be at least the heap the unpickling grew.
func TestPickleMemoryEstimate(t *testing.T) {
	const n = 100_000
	memo := []byte{0x80, 2, ']'}
	for i := range n {
		memo = append(memo, 'r', byte(i), byte(i>>8), byte(i>>16), 0)
	}
	tests := []struct {
		name   string
		pickle []byte
	}{
		{"MARK", append(append([]byte{0x80, 2}, bytes.Repeat([]byte{'('}, maxPickleNesting)...), ')', '.')},
		{"EMPTY_LIST", append(append([]byte{0x80, 2}, bytes.Repeat([]byte{']'}, n)...), '.')},
		{"EMPTY_DICT", append(append([]byte{0x80, 2}, bytes.Repeat([]byte{'}'}, n)...), '.')},
		{"EMPTY_TUPLE", append(append([]byte{0x80, 2}, bytes.Repeat([]byte{')'}, n)...), '.')},
		{"NONE", append(append([]byte{0x80, 2}, bytes.Repeat([]byte{'N'}, n)...), '.')},
		{"DUP", append(append([]byte{0x80, 2, ']'}, bytes.Repeat([]byte{'2'}, n)...), '.')},
		{"SHORT_BINUNICODE", append(append([]byte{0x80, 2}, bytes.Repeat([]byte{0x8c, 3, 'a', 'b', 'c'}, n)...), '.')},
		{"BINFLOAT", append(append([]byte{0x80, 2}, bytes.Repeat([]byte{'G', 1, 2, 3, 4, 5, 6, 7, 8}, n)...), '.')},
		{"LONG_BINPUT", append(memo, '.')},
		{"TUPLE1", append(append([]byte{0x80, 2, 'N'}, bytes.Repeat([]byte{0x85}, n)...), '.')},
		{"APPEND", append(append([]byte{0x80, 2, ']'}, bytes.Repeat([]byte{'N', 'a'}, n)...), '.')},
		{"SETITEM", dictOfInts(n)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			est, rule := scanPickle(tc.pickle)
			if rule != "" {
				t.Fatal(rule)
			}
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			u := pickle.NewUnpickler(bytes.NewReader(tc.pickle))
			v, err := u.Load()
			runtime.ReadMemStats(&after)
			runtime.KeepAlive(v)
			runtime.KeepAlive(u)
			if err != nil {
				t.Fatal(err)
			}
			grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
			if est < grew {
				t.Errorf("estimate %s, but the unpickler's heap grew %s", engine.FormatBytes(est), engine.FormatBytes(grew))
			}
			t.Logf("estimate %s, heap grew %s", engine.FormatBytes(est), engine.FormatBytes(grew))
		})
	}
}

// dictOfInts pickles a dict of n int keys to None, as SETITEMs.
func dictOfInts(n int) []byte {
	p := (&pickler{}).op(0x80, 2, '}')
	for i := range n {
		p.int(i).op('N', 's')
	}
	return p.op('.').Bytes()
}
