package dump

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
)

func TestSafetensorsMalformed(t *testing.T) {
	data24 := f32Bytes(1, 2, 3, 4, 5, 6)
	entry := func(name, dtype, shape, offsets string) string {
		return fmt.Sprintf(`%q:{"dtype":%s,"shape":%s,"data_offsets":%s}`, name, dtype, shape, offsets)
	}
	tooLong := make([]byte, 8)
	binary.LittleEndian.PutUint64(tooLong, 120000000)
	tooLong = append(tooLong, `{"a":1}`...)
	pastEnd := make([]byte, 8)
	binary.LittleEndian.PutUint64(pastEnd, 500)
	pastEnd = append(pastEnd, `{"logits":{}}`...)
	tests := []struct {
		name   string
		data   []byte
		tensor string
		words  []string
	}{
		{"shorter than 8 bytes", []byte{1, 2, 3}, "", []string{"3 bytes", "shorter than the 8-byte header length"}},
		{"header over 100 MB", tooLong, "", []string{"header is 120000000 bytes, over the 100 MB limit"}},
		{"header past end of file", pastEnd, "", []string{"header is 500 bytes", "past the end of the file"}},
		{"a text file named .safetensors", []byte("hello, this is not a dump at all\n"), "", []string{"not a safetensors file", "no '{' follows"}},
		{"header not JSON", rawSafetensors(`{"logits":{"dtype":`, nil), "logits", []string{"header is not JSON", "ends before"}},
		{"header not an object", rawSafetensors(`{]`, nil), "", []string{"not JSON"}},
		{"header does not start with brace", rawSafetensors(` {"a":1}`, nil), "", []string{"does not start with '{'"}},
		{"header not UTF-8", rawSafetensors("{\"lo\xffgits\":1}", nil), "", []string{"UTF-8"}},
		{"more after the header object", rawSafetensors(`{} {}`, nil), "", []string{"more after its JSON object"}},
		{"entry not an object", rawSafetensors(`{"logits":[1,2]}`, nil), "logits", []string{"entry must be an object", "a list"}},
		{"missing dtype", rawSafetensors(`{"logits":{"shape":[2,3],"data_offsets":[0,24]}}`, data24), "logits", []string{`lacks "dtype"`}},
		{"missing shape", rawSafetensors(`{"logits":{"dtype":"F32","data_offsets":[0,24]}}`, data24), "logits", []string{`lacks "shape"`}},
		{"missing data_offsets", rawSafetensors(`{"logits":{"dtype":"F32","shape":[2,3]}}`, data24), "logits", []string{`lacks "data_offsets"`}},
		{"dtype not a string", rawSafetensors("{"+entry("logits", `4`, `[2,3]`, `[0,24]`)+"}", data24), "logits", []string{`"dtype" must be a string`, "a number"}},
		{"shape not a list", rawSafetensors("{"+entry("logits", `"F32"`, `"2x3"`, `[0,24]`)+"}", data24), "logits", []string{`"shape" must be a list of integers`, "a string"}},
		{"shape of floats", rawSafetensors("{"+entry("logits", `"F32"`, `[2.5,3]`, `[0,24]`)+"}", data24), "logits", []string{`"shape" must be a list of integers`, "2.5"}},
		{"shape of strings", rawSafetensors("{"+entry("logits", `"F32"`, `["2",3]`, `[0,24]`)+"}", data24), "logits", []string{"holds a string"}},
		{"offsets not two", rawSafetensors("{"+entry("logits", `"F32"`, `[2,3]`, `[0,12,24]`)+"}", data24), "logits", []string{`"data_offsets" holds more than 2 integers`}},
		{"offsets one", rawSafetensors("{"+entry("logits", `"F32"`, `[2,3]`, `[24]`)+"}", data24), "logits", []string{`"data_offsets" must be two non-negative integers, not [24]`}},
		{"too many dims", rawSafetensors("{"+entry("logits", `"F32"`, "["+strings.Repeat("1,", 64)+"1]", `[0,4]`)+"}", data24), "logits", []string{`"shape" holds more than 64 integers`}},
		{"offsets negative", rawSafetensors("{"+entry("logits", `"F32"`, `[2,3]`, `[-4,20]`)+"}", data24), "logits", []string{`"data_offsets" must be two non-negative integers`}},
		{"offsets outside buffer", rawSafetensors("{"+entry("logits", `"F32"`, `[2,3]`, `[8,32]`)+"}", data24), "logits", []string{"[8, 32] lie outside the 24-byte data buffer"}},
		{"offsets reversed", rawSafetensors("{"+entry("logits", `"F32"`, `[2,3]`, `[24,0]`)+"}", data24), "logits", []string{"[24, 0] are reversed"}},
		{"offsets overlap", rawSafetensors("{"+entry("logits", `"F32"`, `[2,3]`, `[0,24]`)+","+entry("temperature", `"F32"`, `[2]`, `[16,24]`)+"}", data24), "temperature", []string{"overlap tensor \"logits\""}},
		{"byte count mismatch", rawSafetensors("{"+entry("logits", `"F32"`, `[2,3]`, `[0,1000]`)+"}", make([]byte, 1000)), "logits", []string{"1000 bytes of data, but shape [2, 3] of F32 needs 24"}},
		{"shape too large", rawSafetensors("{"+entry("logits", `"F32"`, `[1000000000000,1000000000000]`, `[0,24]`)+"}", data24), "logits", []string{"[1000000000000, 1000000000000]", "too large"}},
		{"shape past 64 bits", rawSafetensors("{"+entry("logits", `"F32"`, `[99999999999999999999]`, `[0,24]`)+"}", data24), "logits", []string{"does not fit in 64 bits"}},
		{"negative dim", rawSafetensors("{"+entry("logits", `"F32"`, `[2,-3]`, `[0,24]`)+"}", data24), "logits", []string{"[2, -3] has a negative dimension"}},
		{"unknown dtype", rawSafetensors("{"+entry("logits", `"I16"`, `[2,3]`, `[0,12]`)+"}", data24), "logits", []string{`unknown dtype "I16"`, "BF16, F16"}},
		{"duplicate tensor", rawSafetensors("{"+entry("logits", `"F32"`, `[2,3]`, `[0,24]`)+","+entry("logits", `"F32"`, `[6]`, `[0,24]`)+"}", data24), "logits", []string{"appears twice"}},
		{"duplicate entry key", rawSafetensors(`{"logits":{"dtype":"F32","dtype":"F32","shape":[6],"data_offsets":[0,24]}}`, data24), "logits", []string{`"dtype" twice`}},
		{"duplicate metadata", rawSafetensors(`{"__metadata__":{},"__metadata__":{}}`, nil), "", []string{"__metadata__ twice"}},
		{"metadata not a string map", rawSafetensors(`{"__metadata__":{"threshold":12}}`, nil), "", []string{"__metadata__ must map strings to strings", `"threshold" holds a number`, `"12"`}},
		{"metadata a list", rawSafetensors(`{"__metadata__":["op"]}`, nil), "", []string{"__metadata__ must be an object"}},
		{"metadata key twice", rawSafetensors(`{"__metadata__":{"op":"a","op":"b"}}`, nil), "", []string{`key "op" twice`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("dump.safetensors", tt.data)
			checkError(t, err, "dump.safetensors", tt.tensor, tt.words...)
		})
	}
}

func TestSafetensorsHugeShapeAllocatesNothing(t *testing.T) {
	data := rawSafetensors(`{"logits":{"dtype":"F64","shape":[1000000000000,1000000000000],"data_offsets":[0,8]}}`, make([]byte, 8))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Parse("dump.safetensors", data)
	runtime.ReadMemStats(&after)
	checkError(t, err, "dump.safetensors", "logits", "too large")
	if d := after.TotalAlloc - before.TotalAlloc; d > 64<<10 {
		t.Errorf("refusing a huge shape allocated %d bytes", d)
	}
}

func TestNPYMalformed(t *testing.T) {
	f4x6 := f32Bytes(1, 2, 3, 4, 5, 6)
	v2 := rawNPY(`{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }`, f4x6)
	v2[6] = 2 // version 2 reads a 4-byte length: the first two dict bytes make it huge
	tests := []struct {
		name  string
		data  []byte
		words []string
	}{
		{"bad magic", []byte("\x93NUMPX\x01\x00\x10\x00{}"), []string{`does not start with "\x93NUMPY"`}},
		{"cut short", []byte("\x93NUMPY\x01"), []string{`does not start with`}},
		{"bad version", append([]byte("\x93NUMPY\x07\x00\x02\x00{}"), f4x6...), []string{"version 7.0"}},
		{"header over limit", v2, []string{"over the 64 KiB limit"}},
		{"header past end", []byte("\x93NUMPY\x01\x00\xff\x00{'descr'"), []string{"npy header is 265 bytes, but the array has only 18"}},
		{"header not a dict", rawNPY(`['descr', '<f4']`, f4x6), []string{"not a dict"}},
		{"header not closed", rawNPY(`{'descr': '<f4', 'fortran_order': False, 'shape': (6,)`, f4x6), []string{"not a Python dict literal"}},
		{"header garbage", rawNPY(`{'descr': <f4}`, f4x6), []string{"not a Python dict literal", "unexpected"}},
		{"lacks shape", rawNPY(`{'descr': '<f4', 'fortran_order': False}`, f4x6), []string{`lacks "shape"`}},
		{"unknown key", rawNPY(`{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'x': 1}`, f4x6), []string{`unknown key "x"`}},
		{"unsupported descr", rawNPY(`{'descr': '<i2', 'fortran_order': False, 'shape': (12,), }`, f4x6), []string{`unsupported npy dtype "<i2"`, "bf16 dumps must be safetensors"}},
		{"bfloat16 from numpy", rawNPY(`{'descr': '<V2', 'fortran_order': False, 'shape': (12,), }`, f4x6), []string{"bf16 dumps must be safetensors"}},
		{"pickled objects", rawNPY(`{'descr': '|O', 'fortran_order': False, 'shape': (3,), }`, f4x6), []string{"pickled"}},
		{"structured descr", rawNPY(`{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,), }`, f4x6), []string{"structured"}},
		{"fortran order", rawNPY(`{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }`, f4x6), []string{"fortran_order is True", "np.ascontiguousarray"}},
		{"fortran not bool", rawNPY(`{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3), }`, f4x6), []string{"True or False"}},
		{"negative dim", rawNPY(`{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 3), }`, f4x6), []string{"non-negative integers"}},
		{"float dim", rawNPY(`{'descr': '<f4', 'fortran_order': False, 'shape': (2.0, 3), }`, f4x6), []string{"2.0 is not an integer"}},
		{"short data", rawNPY(`{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }`, f4x6), []string{"24 bytes of npy data, but shape [2, 4] of <f4 needs 32"}},
		{"extra data", rawNPY(`{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }`, f4x6), []string{"24 bytes of npy data, but shape [5] of <f4 needs 20"}},
		{"shape too large", rawNPY(`{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000, 1000000000000), }`, f4x6), []string{"too large"}},
		{"string array", rawNPY(`{'descr': '<U3', 'fortran_order': False, 'shape': (2,), }`, f4x6), []string{"holds strings"}},
		{"nested too deep", rawNPY(`{'descr': '<f4', 'fortran_order': False, 'shape': ((((((((((((((((((6,),),),),),),),),),),),),),),),),),), }`, f4x6), []string{"nested"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("dump.npy", tt.data)
			checkError(t, err, "dump.npy", "logits", tt.words...)
		})
	}
}

func TestNPYAccepted(t *testing.T) {
	tests := []struct {
		name  string
		dict  string
		shape []int
	}{
		{"python 2 longs", `{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }`, []int{2, 3}},
		{"double quotes, no trailing comma", `{"descr": "<f4", "fortran_order": False, "shape": (6,)}`, []int{6}},
		{"fortran with one long dim", `{'descr': '<f4', 'fortran_order': True, 'shape': (1, 6), }`, []int{1, 6}},
		{"shape as list", `{'descr': '<f4', 'fortran_order': False, 'shape': [3, 2], }`, []int{3, 2}},
	}
	rng := newRand(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := make([]float32, 6)
			for i := range data {
				data[i] = float32(rng.NormFloat64()) + 3
			}
			f, err := Parse("x.npy", rawNPY(tt.dict, f32Bytes(data...)))
			if err != nil {
				t.Fatal(err)
			}
			lg := f.Tensors[0]
			if fmt.Sprint(lg.Shape) != fmt.Sprint(tt.shape) {
				t.Errorf("shape %v, want %v", lg.Shape, tt.shape)
			}
			for i, want := range data {
				if got := lg.Float32(i); got != want {
					t.Errorf("element %d = %v, want %v", i, got, want)
				}
			}
		})
	}
}

func TestNPZMalformed(t *testing.T) {
	rng := newRand(t)
	logits := randomTensor(rng, "logits", engine.F32, 2, 5)
	good := npyBytes(t, logits)
	header := good[:len(good)-len(logits.Data)]
	bigHeader := npyHeaderFor("<f4", []int{100})
	metaNPY := func(json string) []byte {
		var b bytes.Buffer
		for _, r := range json {
			binary.Write(&b, binary.LittleEndian, uint32(r))
		}
		return append(npyHeaderFor(fmt.Sprintf("<U%d", len([]rune(json))), nil), b.Bytes()...)
	}
	var deflated bytes.Buffer
	fw, _ := flate.NewWriter(&deflated, flate.BestCompression)
	fw.Write(append(append([]byte(nil), good...), good...)) // twice the member's content
	fw.Close()
	var truncated bytes.Buffer
	fw, _ = flate.NewWriter(&truncated, flate.BestCompression)
	fw.Write(good[:len(good)-8])
	fw.Close()
	badMagic := append([]byte(nil), good...)
	badMagic[1] = 'X'
	tests := []struct {
		name   string
		data   []byte
		tensor string
		words  []string
	}{
		{"bad zip", append([]byte("PK\x03\x04"), bytes.Repeat([]byte{7}, 40)...), "", []string{"not a valid zip archive"}},
		{"duplicate member", zipOf(t, member{name: "logits.npy", content: good}, member{name: "logits.npy", content: good}), "logits", []string{"appears twice"}},
		{"bad npy magic", zipOf(t, member{name: "logits.npy", content: badMagic}), "logits", []string{`does not start with "\x93NUMPY"`}},
		{"bad npy magic deflated", zipOf(t, member{name: "logits.npy", content: badMagic, method: zip.Deflate}), "logits", []string{`does not start with "\x93NUMPY"`}},
		{"short npy data", zipOf(t, member{name: "logits.npy", content: good[:len(good)-4]}), "logits", []string{"36 bytes of npy data, but shape [2, 5] of <f4 needs 40"}},
		{"inflated size disagrees with header", zipOf(t, member{name: "logits.npy", content: append(append([]byte(nil), bigHeader...), logits.Data...), method: zip.Deflate}), "logits", []string{"inflates to", "shape [100] of <f4 need"}},
		{"inflates past declared size", zipOf(t, member{name: "logits.npy", content: good, method: zip.Deflate, compressed: deflated.Bytes()}), "logits", []string{"inflates past its declared"}},
		{"inflates short of declared size", zipOf(t, member{name: "logits.npy", content: good, method: zip.Deflate, compressed: truncated.Bytes()}), "logits", []string{"fewer than its declared"}},
		{"zip member declares more than its header", zipOf(t, member{name: "logits.npy", content: good, method: zip.Deflate, declared: 1 << 40}), "logits", []string{"inflates to 1099511627776 bytes, but its npy header and shape [2, 5]"}},
		{"zip bomb", zipOf(t, member{name: "logits.npy", content: append(npyHeaderFor("<f4", []int{1 << 20, 1 << 10}), make([]byte, 64)...), method: zip.Deflate, declared: uint64(len(npyHeaderFor("<f4", []int{1 << 20, 1 << 10}))) + 4<<30}), "logits", []string{"inflating the zip member takes 4 GiB of memory", "more than the 1 GiB this run may hold"}},
		{"header longer than member", zipOf(t, member{name: "logits.npy", content: header[:20], method: zip.Deflate}), "logits", []string{"npy header is 128 bytes, but the zip member inflates to 20"}},
		{"crc mismatch stored", zipOf(t, member{name: "logits.npy", content: good, badCRC: true}), "logits", []string{"CRC-32"}},
		{"crc mismatch deflated", zipOf(t, member{name: "logits.npy", content: good, method: zip.Deflate, badCRC: true}), "logits", []string{"CRC-32"}},
		{"unsupported method", zipOf(t, member{name: "logits.npy", content: good, method: 12}), "logits", []string{"compression method 12", "stored or deflated"}},
		{"metadata not a string map", zipOf(t, member{name: "__metadata__.npy", content: metaNPY(`{"threshold": 12}`)}), "", []string{`__metadata__ must map strings to strings, but "threshold" holds a number`}},
		{"metadata not JSON", zipOf(t, member{name: "__metadata__.npy", content: metaNPY(`{"op": }`)}), "", []string{"__metadata__ is not JSON", "at byte"}},
		{"metadata a list", zipOf(t, member{name: "__metadata__.npy", content: metaNPY(`["op"]`)}), "", []string{"__metadata__ must be an object"}},
		{"metadata trailing", zipOf(t, member{name: "__metadata__.npy", content: metaNPY(`{} x`)}), "", []string{"__metadata__ has more after"}},
		{"metadata not a string array", zipOf(t, member{name: "__metadata__.npy", content: good}), "__metadata__", []string{"must be a string array"}},
		{"metadata bad utf-32", zipOf(t, member{name: "__metadata__.npy", content: append(npyHeaderFor("<U1", nil), 0, 0xd8, 0, 0)}), "__metadata__", []string{"not valid UTF-32"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseAndLoad("dump.npz", tt.data)
			checkError(t, err, "dump.npz", tt.tensor, tt.words...)
		})
	}
}

func TestNPZAccepted(t *testing.T) {
	rng := newRand(t)
	logits := randomTensor(rng, "logits", engine.F32, 3, 7)
	be := npyHeaderFor(">f4", logits.Shape)
	beData := append([]byte(nil), logits.Data...)
	swapBytes(beData, beData, 4)
	sBytes := append(npyHeaderFor("|S13", nil), `{"op":"argmax"}`[:13]...)
	tests := []struct {
		name    string
		data    []byte
		meta    map[string]string
		notices int
	}{
		{"deflated", zipOf(t, member{name: "logits.npy", content: npyBytes(t, logits), method: zip.Deflate}), nil, 0},
		{"big-endian stored", zipOf(t, member{name: "logits.npy", content: append(be, beData...)}), nil, 0},
		{"big-endian deflated", zipOf(t, member{name: "logits.npy", content: append(be, beData...), method: zip.Deflate}), nil, 0},
		{"directory and other members", zipOf(t, member{name: "notes/"}, member{name: "notes/readme.txt", content: []byte("hi")}, member{name: "logits.npy", content: npyBytes(t, logits)}), nil, 1},
		{"bytes metadata", zipOf(t, member{name: "logits.npy", content: npyBytes(t, logits)}, member{name: "__metadata__.npy", content: append(sBytes[:len(sBytes)-13], `{"op":"soft"}`...)}), map[string]string{"op": "soft"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := parseAndLoad("dump.npz", tt.data)
			if err != nil {
				t.Fatal(err)
			}
			got := f.Tensor("logits")
			if got == nil || !bytes.Equal(got.Data, logits.Data) || fmt.Sprint(got.Shape) != fmt.Sprint(logits.Shape) {
				t.Fatalf("logits = %+v, want %v", got, logits.Shape)
			}
			if len(f.Notices) != tt.notices {
				t.Errorf("notices %q, want %d", f.Notices, tt.notices)
			}
			for k, v := range tt.meta {
				if f.Meta[k] != v {
					t.Errorf("meta %q = %q, want %q", k, f.Meta[k], v)
				}
			}
		})
	}
}

func TestDetect(t *testing.T) {
	rng := newRand(t)
	lg := randomTensor(rng, "logits", engine.F32, 2, 3)
	tests := []struct {
		name string
		file string
		data []byte
		want Format
	}{
		{"safetensors named npy", "dump.npy", safetensorsBytes(t, nil, lg), Safetensors},
		{"npz named bin", "dump.bin", npzBytes(t, nil, lg), NPZ},
		{"npy named safetensors", "dump.safetensors", npyBytes(t, lg), NPY},
		{"empty npz", "dump", zipOf(t), NPZ},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := parseAndLoad(tt.file, tt.data)
			if err != nil {
				t.Fatal(err)
			}
			if f.Format != tt.want {
				t.Errorf("format %q, want %q", f.Format, tt.want)
			}
		})
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(safetensorsBytes(t, nil, lg))
	zw.Close()
	// Files in no container say so in one sentence, whatever their name
	// says: an empty file, a compressed dump, anything else.
	for _, tt := range []struct {
		name, file string
		data       []byte
		want       string
	}{
		{"not a dump", "notes.txt", []byte("hello, this is not a dump"), "notes.txt: not a dump: the content is neither safetensors, .npz, .npy nor .pt"},
		{"empty npy", "x.npy", nil, "x.npy: the file is empty (0 bytes), not a dump (safetensors, .npz, .npy or .pt)"},
		{"empty safetensors", "x.safetensors", []byte{}, "x.safetensors: the file is empty (0 bytes)"},
		{"gzipped safetensors", "dump.safetensors.gz", gz.Bytes(), "dump.safetensors.gz: not a dump but a gzip-compressed file: decompress it (gunzip)"},
		{"gzipped, named safetensors", "dump.safetensors", gz.Bytes(), "dump.safetensors: not a dump but a gzip-compressed file"},
		{"zstd", "dump.safetensors.zst", []byte("\x28\xb5\x2f\xfd\x00\x58\x61\x00\x00\x10"), "zstd-compressed file: decompress it (unzstd)"},
		{"xz", "dump.npz.xz", []byte("\xfd7zXZ\x00\x00\x04\xe6\xd6"), "xz-compressed file"},
		{"bzip2", "dump.pt.bz2", []byte("BZh91AY&SY"), "bzip2-compressed file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.file, tt.data)
			checkError(t, err, tt.file, "", tt.want)
		})
	}
	_, err := Open("testdata/no-such-file.safetensors")
	checkError(t, err, "no-such-file.safetensors", "", "cannot read the file")
	if !strings.Contains(err.Error(), "no such file") {
		t.Errorf("error %q hides the cause", err)
	}
}

// TestNPZVerify: Verify refuses a deflated member that Load would refuse,
// in Load's words, and streams a good one without its memory.
func TestNPZVerify(t *testing.T) {
	rng := newRand(t)
	logits := randomTensor(rng, "logits", engine.F32, 2, 5)
	good := append(npyHeaderFor("<f4", logits.Shape), logits.Data...)
	var twice, short bytes.Buffer
	fw, _ := flate.NewWriter(&twice, flate.BestCompression)
	fw.Write(append(append([]byte(nil), good...), make([]byte, 16<<20)...))
	fw.Close()
	fw, _ = flate.NewWriter(&short, flate.BestCompression)
	fw.Write(good[:len(good)-8])
	fw.Close()
	tests := []struct {
		name string
		m    member
		want string // "" for a good member
	}{
		{"good", member{name: "logits.npy", content: good, method: zip.Deflate}, ""},
		{"fails its CRC", member{name: "logits.npy", content: good, method: zip.Deflate, badCRC: true}, "zip member fails its CRC-32 check"},
		{"inflates 16 MiB past its declared size", member{name: "logits.npy", content: good, method: zip.Deflate, compressed: twice.Bytes()}, "zip member inflates past its declared 168 bytes"},
		{"inflates short of its declared size", member{name: "logits.npy", content: good, method: zip.Deflate, compressed: short.Bytes()}, "zip member inflates to fewer than its declared 168 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := zipOf(t, tt.m)
			f, err := Parse("dump.npz", data)
			if err != nil {
				t.Fatal(err)
			}
			verr := f.Verify(context.Background(), "logits")
			lerr := f.Load("logits")
			if tt.want == "" {
				if verr != nil || lerr != nil {
					t.Fatalf("Verify: %v; Load: %v", verr, lerr)
				}
				return
			}
			checkError(t, verr, "dump.npz", "logits", tt.want)
			if lerr == nil || lerr.Error() != verr.Error() {
				t.Errorf("Verify says %q, Load %v", verr, lerr)
			}
		})
	}

	t.Run("streams without the data's memory", func(t *testing.T) {
		shape := []int{64, 1 << 16} // 16 MiB of F32
		data := zipOf(t, member{name: "logits.npy", content: append(npyHeaderFor("<f4", shape), make([]byte, 4*64<<16)...), method: zip.Deflate})
		f, err := Parse("big.npz", data)
		if err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if err := f.Verify(context.Background(), "logits"); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		if took := after.TotalAlloc - before.TotalAlloc; took > 1<<20 {
			t.Errorf("Verify allocated %s for a 16 MiB member", engine.FormatBytes(int64(took)))
		}
		if f.Tensor("logits").Data != nil || f.Held() != 0 {
			t.Error("Verify loaded the tensor")
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := f.Verify(ctx, "logits"); !errors.Is(err, context.Canceled) {
			t.Errorf("Verify with a cancelled context: %v", err)
		}
	})
}
