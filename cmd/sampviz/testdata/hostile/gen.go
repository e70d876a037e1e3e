//go:build ignore

// gen writes the hostile corpus of this folder: dumps that try to take the
// machine's memory or time, each with what sampviz must answer (corpus.json).
// Run it from the repository root: go run ./cmd/sampviz/testdata/hostile/gen.go
package main

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/dump"
)

const dir = "cmd/sampviz/testdata/hostile"

// entry is one hostile file and what sampviz must answer: the exit status
// of `sampviz check` with Args, the HTTP status of an upload with Query, and
// words of the sentence both say.
type entry struct {
	File   string   `json:"file"`
	What   string   `json:"what"`
	Args   []string `json:"args,omitempty"`
	Query  string   `json:"query,omitempty"`
	Exit   int      `json:"exit"`
	Status int      `json:"status"`
	Words  []string `json:"words"`
}

func main() {
	var corpus []entry
	add := func(e entry, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, e.File), data, 0o644); err != nil {
			panic(err)
		}
		corpus = append(corpus, e)
	}

	// An npz whose logits inflate from 1 MB to 1 GiB ([1, 268435424] F32).
	add(entry{File: "bomb.npz", What: "a 1 MB npz whose logits inflate to 1 GiB",
		Exit: 2, Status: 413, Words: []string{"bomb.npz needs about", "of memory to judge", "more than the"}},
		zipOf(member{"logits.npy", npyHeader("<f4", []int{1, 268435424}), 4 * 268435424, flate.BestCompression}))

	// Two unused members inflating to 1.5 GiB each beside a small softmax:
	// judged without inflating them.
	var small bytes.Buffer
	x := make([]float32, 4*64)
	for i := range x {
		x[i] = float32(i%13) / 4
	}
	if err := dump.WriteNPZ(&small, []*engine.Tensor{engine.FromFloat32s("logits", engine.F32, []int{4, 64}, x)}, map[string]string{"op": "softmax"}); err != nil {
		panic(err)
	}
	add(entry{File: "unused_members.npz", What: "two unused members that inflate to 1.5 GiB each beside a small softmax",
		Exit: 0, Status: 201, Words: []string{"unused"}},
		withMembers(small.Bytes(),
			member{"notes_a.npy", npyHeader("<f4", []int{402653184}), 4 * 402653184, flate.BestCompression},
			member{"notes_b.npy", npyHeader("<f4", []int{402653184}), 4 * 402653184, flate.BestCompression}))

	// A small spec_verify dump asked for the most trials: 2000 rows x 10^5
	// trials of 5 tokens is 4 GB of our outputs alone.
	rows, k, v := 2000, 4, 8
	tl := make([]float32, rows*(k+1)*v)
	for i := range tl {
		tl[i] = float32(i%7) / 3
	}
	drafts := make([]int64, rows*k)
	for i := range drafts {
		drafts[i] = int64(i % v)
	}
	var spec bytes.Buffer
	if err := dump.WriteSafetensors(&spec, []*engine.Tensor{
		engine.FromFloat32s("target_logits", engine.BF16, []int{rows, k + 1, v}, tl),
		engine.FromInts("draft_tokens", engine.I32, []int{rows, k}, drafts),
	}, map[string]string{"op": "spec_verify"}); err != nil {
		panic(err)
	}
	add(entry{File: "spec_trials.safetensors", What: "2000 spec_verify rows asked for 10^5 trials each",
		Args: []string{"--trials", "100000"}, Query: "trials=100000",
		Exit: 2, Status: 413, Words: []string{"spec_trials.safetensors needs about", "our outputs", "more than the"}}, spec.Bytes())

	// A sample dump asked for a million draws on each of 4096 rows.
	lg := make([]float32, 4096*16)
	for i := range lg {
		lg[i] = float32(i%5) / 2
	}
	var sample bytes.Buffer
	if err := dump.WriteSafetensors(&sample, []*engine.Tensor{engine.FromFloat32s("logits", engine.BF16, []int{4096, 16}, lg)}, map[string]string{"op": "sample"}); err != nil {
		panic(err)
	}
	add(entry{File: "sample_draws.safetensors", What: "4096 sample rows asked for 10^6 draws each",
		Args: []string{"--draws", "1000000"}, Query: "draws=1000000",
		Exit: 2, Status: 413, Words: []string{"sample_draws.safetensors needs about", "our outputs", "more than the"}}, sample.Bytes())
	add(entry{File: "sample_draws.safetensors", What: "draws past the parameter's range",
		Args: []string{"--draws", "100000000000"}, Query: "draws=100000000000",
		Exit: 2, Status: 400, Words: []string{"draws must be an integer in [0, 1000000]"}}, sample.Bytes())

	// Shapes that declare more than any machine holds, in a few bytes.
	add(entry{File: "huge_shape.safetensors", What: "a safetensors header declaring logits of [10^12, 10^12]",
		Exit: 2, Status: 400, Words: []string{"huge_shape.safetensors", "logits", "too large"}},
		rawSafetensors(`{"logits":{"dtype":"F32","shape":[1000000000000,1000000000000],"data_offsets":[0,8]}}`, make([]byte, 8)))
	add(entry{File: "huge_header.safetensors", What: "a safetensors header length of 10^15 bytes",
		Exit: 2, Status: 400, Words: []string{"huge_header.safetensors", "header is 1000000000000000 bytes"}},
		append(binary.LittleEndian.AppendUint64(nil, 1e15), `{}`...))
	add(entry{File: "deep_header.safetensors", What: "a safetensors header nested 100000 deep",
		Exit: 2, Status: 400, Words: []string{"deep_header.safetensors"}},
		rawSafetensors(`{"logits":`+strings.Repeat("[", 100000)+strings.Repeat("]", 100000)+`}`, nil))
	add(entry{File: "huge_shape.npy", What: "an npy header declaring [10^12, 10^12]",
		Exit: 2, Status: 400, Words: []string{"huge_shape.npy", "too large"}},
		append(npyHeader("<f4", []int{1000000000000, 1000000000000}), make([]byte, 16)...))

	b, _ := json.MarshalIndent(corpus, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "corpus.json"), append(b, '\n'), 0o644); err != nil {
		panic(err)
	}
	fmt.Println("wrote", len(corpus), "entries")
}

// member is one deflated npz member: a header, then size zero bytes of
// data, deflated at level.
type member struct {
	name   string
	header []byte
	size   int64
	level  int
}

// zipOf writes an npz of deflated members.
func zipOf(ms ...member) []byte { return withMembers(nil, ms...) }

// withMembers appends deflated members to the npz in base (nil: a new one).
func withMembers(base []byte, ms ...member) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	if base != nil {
		zr, err := zip.NewReader(bytes.NewReader(base), int64(len(base)))
		if err != nil {
			panic(err)
		}
		for _, f := range zr.File {
			if err := zw.Copy(f); err != nil {
				panic(err)
			}
		}
	}
	for _, m := range ms {
		zw.RegisterCompressor(zip.Deflate, func(w io.Writer) (io.WriteCloser, error) { return flate.NewWriter(w, m.level) })
		w, err := zw.CreateHeader(&zip.FileHeader{Name: m.name, Method: zip.Deflate})
		if err != nil {
			panic(err)
		}
		w.Write(m.header)
		zeros := make([]byte, 1<<20)
		for left := m.size; left > 0; left -= int64(len(zeros)) {
			w.Write(zeros[:min(left, int64(len(zeros)))])
		}
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// npyHeader is a version 1.0 npy header for descr and shape.
func npyHeader(descr string, shape []int) []byte {
	var dims []string
	for _, d := range shape {
		dims = append(dims, fmt.Sprint(d))
	}
	sh := strings.Join(dims, ", ")
	if len(shape) == 1 {
		sh += ","
	}
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, sh)
	total := 10 + len(dict) + 1
	pad := (64 - total%64) % 64
	dict += strings.Repeat(" ", pad) + "\n"
	h := append([]byte("\x93NUMPY\x01\x00"), byte(len(dict)), byte(len(dict)>>8))
	return append(h, dict...)
}

// rawSafetensors writes header and data as a safetensors file.
func rawSafetensors(header string, data []byte) []byte {
	for len(header)%8 != 0 {
		header += " "
	}
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	return append(append(b, header...), data...)
}
