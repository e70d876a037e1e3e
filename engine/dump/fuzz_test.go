package dump

import (
	"archive/zip"
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/sampviz/sampviz/engine"
)

// The fuzz targets feed arbitrary bytes to Parse and, when they parse, to
// BuildRun with a memory limit of fuzzLimit: neither may panic, hang or
// allocate past the input and the limit, every failure must be a *Error,
// and Parse must leave its input unchanged. (engine/session's FuzzJob goes
// on to the budget, the backend and the judge.)

func FuzzSafetensors(f *testing.F) {
	for _, seed := range fuzzSeeds(f, func(meta map[string]string, ts []*engine.Tensor) []byte {
		return safetensorsBytes(f, meta, ts...)
	}) {
		f.Add(seed)
	}
	data24 := f32Bytes(1, 2, 3, 4, 5, 6)
	for _, header := range []string{
		`{"logits":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}}`,
		`{"logits":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},"logits":{"dtype":"F32","shape":[6],"data_offsets":[0,24]}}`,
		`{"logits":{"dtype":"F32","shape":[1000000000000,1000000000000],"data_offsets":[0,24]}}`,
		`{"__metadata__":{"op":"argmax"},"logits":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},"tokens":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}}`,
		`{"__metadata__":{"op":3}}`,
		`{"logits":{"dtype":"F32","shape":[2,3],"data_offsets":[24,0]}}`,
		`{"logits":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24],"extra":[[[{}]]]}}`,
	} {
		f.Add(rawSafetensors(header, data24))
	}
	f.Fuzz(func(t *testing.T, data []byte) { fuzzOne(t, "fuzz.safetensors", data) })
}

func FuzzNPZ(f *testing.F) {
	for _, seed := range fuzzSeeds(f, func(meta map[string]string, ts []*engine.Tensor) []byte {
		return npzBytes(f, meta, ts...)
	}) {
		f.Add(seed)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	lg := randomTensor(rng, "logits", engine.F32, 2, 5)
	good := npyBytes(f, lg)
	f.Add(zipOf(f, member{name: "logits.npy", content: good, method: zip.Deflate}))
	f.Add(zipOf(f, member{name: "logits.npy", content: good, method: zip.Deflate, declared: 1 << 30}))
	f.Add(zipOf(f, member{name: "logits.npy", content: good, badCRC: true}))
	f.Add(zipOf(f, member{name: "logits.npy", content: good}, member{name: "logits.npy", content: good}))
	f.Add(zipOf(f, member{name: "logits.npy", content: good}, member{name: "__metadata__.npy", content: append(npyHeaderFor("|S2", nil), "{}"...)}))
	f.Add(zipOf(f, member{name: "dir/"}, member{name: "notes.txt", content: []byte("x")}))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzOne(t, "fuzz.npz", data) })
}

func FuzzNPY(f *testing.F) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, dtype := range allDTypes[1:] {
		f.Add(npyBytes(f, randomTensor(rng, "logits", dtype, 2, 3)))
	}
	f.Add(npyBytes(f, randomTensor(rng, "logits", engine.F32)))
	f64 := f32Bytes(1, 2, 3, 4, 5, 6)
	for _, dict := range []string{
		`{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }`,
		`{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }`,
		`{'descr': '<U6', 'fortran_order': False, 'shape': (), }`,
		`{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,), }`,
		`{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }`,
		`{"descr": "<f4", "fortran_order": False, "shape": (1000000000000, 1000000000000)}`,
	} {
		f.Add(rawNPY(dict, f64))
	}
	f.Fuzz(func(t *testing.T, data []byte) { fuzzOne(t, "fuzz.npy", data) })
}

// fuzzSeeds writes one valid dump per op with write, then broken variants of
// each: cut short, a byte flipped in the header, the header length bumped.
func fuzzSeeds(tb testing.TB, write func(map[string]string, []*engine.Tensor) []byte) [][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	m := dumpMaker{rng: rng, b: 2, v: 5, k: 2, l: 4}
	lg := randomTensor(rng, "logits", engine.F16, 2, 5)
	dumps := [][]*engine.Tensor{
		{lg},
		{lg, m.ints("tokens", engine.I32, []int{2}, 0, 5), engine.NewTensor("temperature", engine.F32)},
		{lg, m.floats("top_p", []int{2}, 0.2, 1), m.ints("top_k", engine.I64, nil, 1, 4), m.floats("probs", []int{2, 5}, 0, 1)},
		{lg, m.ints("seed", engine.I64, []int{2}, 0, 99), m.ints("samples", engine.I64, []int{2, 3}, 0, 5)},
		append(m.spec(), m.floats("draft_probs", []int{2, 2, 5}, 0, 1), m.ints("spec_tokens", engine.I32, []int{2, 3}, -1, 5)),
		append(m.ngram(), m.ints("draft_out", engine.I32, []int{2, 8}, -1, 5)),
	}
	var seeds [][]byte
	for i, ts := range dumps {
		meta := map[string]string{"source": "fuzz"}
		if i == 0 {
			meta["op"] = "softmax"
		}
		valid := write(meta, ts)
		seeds = append(seeds, valid, valid[:len(valid)/2], valid[:9])
		flipped := bytes.Clone(valid)
		flipped[20] ^= 0x20
		bumped := bytes.Clone(valid)
		bumped[0] += 8
		seeds = append(seeds, flipped, bumped)
	}
	return seeds
}

// fuzzLimit is the memory a fuzzed dump may take inflating or converting.
const fuzzLimit = 16 << 20

func fuzzOne(t *testing.T, name string, data []byte) {
	before := bytes.Clone(data)
	f, err := Parse(name, data)
	if !bytes.Equal(data, before) {
		t.Fatal("Parse changed its input")
	}
	var de *Error
	if err != nil {
		if !errors.As(err, &de) {
			t.Fatalf("Parse error %q is %T, not *Error", err, err)
		}
		return
	}
	f.Limit = fuzzLimit
	run, err := BuildRun(f, engine.Overrides{})
	if err != nil {
		if !errors.As(err, &de) {
			t.Fatalf("BuildRun error %q is %T, not *Error", err, err)
		}
		return
	}
	rows := run.Rows()
	if rows <= 0 || len(run.Params.Temperature) != rows || len(run.Params.TopK) != rows || len(run.Params.Seed) != rows {
		t.Fatalf("run of op %s has %d rows and params %+v", run.Op, rows, run.Params)
	}
}
