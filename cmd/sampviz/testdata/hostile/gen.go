//go:build ignore

// gen writes the hostile corpus of this folder: dumps that try to take the
// machine's memory or time, to run code, or to slip a broken container or a
// logically wrong dump past the readers, and the data (NaN, ±Inf) that must
// be judged rather than refused, each with what sampviz must answer
// (corpus.json). Run it from the repository root:
//
//	go run ./cmd/sampviz/testdata/hostile/gen.go
//
// With -bugs DIR it also writes to DIR the files that show known bugs, with
// the answers they should get (DIR/bugs.json), kept out of the corpus until
// the bugs are fixed (none now: each file that showed one is in the corpus).
package main

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"math"
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

// bugsDir, when set (-bugs DIR), receives the files that show a bug of
// sampviz, each with the answer it should give, kept out of the corpus
// until the bug is fixed.
var bugsDir = flag.String("bugs", "", "also write the files that show known bugs, and bugs.json, to this folder")

// bugs are the entries written to bugsDir.
var bugs []entry

// bug records a file that shows a bug: e is the right answer, which
// sampviz does not give yet.
func bug(e entry, data []byte) {
	if *bugsDir == "" {
		return
	}
	if err := os.WriteFile(filepath.Join(*bugsDir, e.File), data, 0o644); err != nil {
		panic(err)
	}
	bugs = append(bugs, e)
}

func main() {
	flag.Parse()
	if *bugsDir != "" {
		if err := os.MkdirAll(*bugsDir, 0o755); err != nil {
			panic(err)
		}
	}
	var corpus []entry
	bugs = []entry{}
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
		Exit: 2, Status: 400, Words: []string{"must be an integer in [0, 1000000000]"}}, sample.Bytes())

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

	more(add)

	b, _ := json.MarshalIndent(corpus, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "corpus.json"), append(b, '\n'), 0o644); err != nil {
		panic(err)
	}
	fmt.Println("wrote", len(corpus), "entries")
	if *bugsDir != "" {
		b, _ := json.MarshalIndent(bugs, "", "  ")
		if err := os.WriteFile(filepath.Join(*bugsDir, "bugs.json"), append(b, '\n'), 0o644); err != nil {
			panic(err)
		}
		fmt.Println("wrote", len(bugs), "files that show bugs to", *bugsDir)
	}
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

// more adds the corpus of broken containers, forbidden pickles, logically
// wrong dumps and hard data (NaN, ±Inf): each a distinct attack or mistake,
// with the answer a user wants.
func more(add func(entry, []byte)) {
	// refused is a file that cannot be used: exit 2, 400, one sentence that
	// names the file and says the rule it broke.
	refused := func(file, what string, words ...string) entry {
		return entry{File: file, What: what, Exit: 2, Status: 400, Words: append([]string{file}, words...)}
	}
	// accepted is a file that is judged: exit 0 (all pass) or 1 (a
	// finding), 201, and a run that finishes.
	accepted := func(file, what string, exit int) entry {
		return entry{File: file, What: what, Exit: exit, Status: 201, Words: []string{}}
	}
	// A softmax of [4, 16] F32 logits: 256 bytes of data.
	const header = `"logits":{"dtype":"F32","shape":[4,16],"data_offsets":[0,256]}`
	data := f32Tensor("logits", 4, 16).Data

	// safetensors containers, broken.
	add(refused("st_truncated.safetensors", "a safetensors file cut off halfway through its data", `"logits"`, "data buffer"),
		rawSafetensors(`{`+header+`}`, data[:128]))
	add(refused("st_overlap.safetensors", "two safetensors tensors whose data_offsets overlap", "overlap"),
		rawSafetensors(`{`+header+`,"temperature":{"dtype":"F32","shape":[4],"data_offsets":[240,256]}}`, data))
	add(accepted("st_out_of_order.safetensors", "safetensors data_offsets in another order than the header's (valid)", 0),
		rawSafetensors(`{"temperature":{"dtype":"F32","shape":[4],"data_offsets":[256,272]},`+header+`}`, append(append([]byte(nil), data...), f32Bytes(1, 0.5, 2, 1)...)))
	add(refused("st_offsets_past_eof.safetensors", "safetensors data_offsets a terabyte past the end of the file", `"logits"`, "outside"),
		rawSafetensors(`{"logits":{"dtype":"F32","shape":[4,16],"data_offsets":[1099511627776,1099511628032]}}`, data))
	add(refused("st_header_past_eof.safetensors", "a safetensors header length past the end of the file", "past the end of the file"),
		append(binary.LittleEndian.AppendUint64(nil, 4096), `{`+header+`}`...))
	add(refused("st_not_utf8.safetensors", "a safetensors header that is not UTF-8", "UTF-8"),
		rawSafetensors("{\"logits\xff\xfe\":"+header[len(`"logits":`):]+"}", data))
	add(refused("st_bad_json.safetensors", "a safetensors header that is not JSON (a missing brace)", "not JSON"),
		rawSafetensors(`{`+header, data))
	add(refused("st_duplicate.safetensors", "a safetensors header naming logits twice", `"logits"`, "twice"),
		rawSafetensors(`{`+header+`,`+header+`}`, data))
	add(refused("st_unknown_dtype.safetensors", "a safetensors tensor of dtype F8_E4M3", `"logits"`, `"F8_E4M3"`),
		rawSafetensors(`{"logits":{"dtype":"F8_E4M3","shape":[4,64],"data_offsets":[0,256]}}`, data))
	add(refused("st_negative_shape.safetensors", "a safetensors shape with a negative dimension", `"logits"`, "negative"),
		rawSafetensors(`{"logits":{"dtype":"F32","shape":[-4,-16],"data_offsets":[0,256]}}`, data))
	add(refused("st_float_shape.safetensors", "a safetensors shape of non-integers", `"logits"`, "4.5"),
		rawSafetensors(`{"logits":{"dtype":"F32","shape":[4.5,14.2],"data_offsets":[0,256]}}`, data))
	add(refused("st_size_mismatch.safetensors", "a safetensors shape that needs more bytes than its data_offsets hold", `"logits"`, "128 bytes", "needs 256"),
		rawSafetensors(`{"logits":{"dtype":"F32","shape":[4,16],"data_offsets":[0,128]}}`, data))
	add(refused("st_metadata_numbers.safetensors", "safetensors __metadata__ holding a number, not a string", "__metadata__", `"top_k"`),
		rawSafetensors(`{"__metadata__":{"op":"renorm","top_k":5},`+header+`}`, data))
	add(refused("st_op_unknown.safetensors", "an op the table does not know (top_k)", `"op"`, `"top_k"`),
		st(map[string]string{"op": "top_k"}, f32Tensor("logits", 4, 16)))
	add(refused("st_temperature_negative.safetensors", "a temperature of -1", `"temperature"`, "temperature must be", "-1"),
		st(map[string]string{"op": "softmax"}, f32Tensor("logits", 4, 16), engine.FromFloat32s("temperature", engine.F32, []int{4}, []float32{1, -1, 1, 1})))
	add(refused("st_top_p_2.safetensors", "a top_p of 2", `"top_p"`, "top_p must be", "not 2"),
		st(map[string]string{"op": "renorm"}, f32Tensor("logits", 4, 16), engine.FromFloat32s("top_p", engine.F32, []int{}, []float32{2})))
	add(refused("st_top_k_negative.safetensors", "a top_k of -5", `"top_k"`, "top_k must be", "-5"),
		st(map[string]string{"op": "renorm"}, f32Tensor("logits", 4, 16), engine.FromInts("top_k", engine.I64, []int{4}, []int64{5, 5, -5, 5})))
	// Logprobs a judge cannot read (docs/DUMPS.md "Logprobs"): a top-N whose
	// ids repeat or leave the vocabulary, a top-N without its ids, a kind
	// that is neither raw nor processed.
	top3 := f32Tensor("logprobs", 4, 3)
	lpIDs := func(v ...int64) *engine.Tensor {
		return engine.FromInts("logprob_token_ids", engine.I64, []int{4, 3}, v)
	}
	add(refused("lp_repeated_ids.safetensors", "a top-3 of logprobs naming token 5 twice in row 2", `"logprob_token_ids"`, "row 2 holds token 5 at positions 0 and 2", "once"),
		st(map[string]string{"op": "softmax"}, f32Tensor("logits", 4, 16), top3, lpIDs(0, 1, 2, 3, 4, 5, 5, 6, 5, 7, 8, 9)))
	add(refused("lp_ids_past_vocab.safetensors", "a top-3 of logprobs naming token 16 of a 16-token vocabulary", `"logprob_token_ids"`, "row 3, position 1 holds token 16", "outside the vocabulary [0, 16)"),
		st(map[string]string{"op": "softmax"}, f32Tensor("logits", 4, 16), top3, lpIDs(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 11)))
	add(refused("lp_top_n_without_ids.safetensors", "logprobs [4, 3] without the token ids of a top-N", `"logprobs"`, "is neither [4, 16]", "logprob_token_ids [4, 3]"),
		st(map[string]string{"op": "softmax"}, f32Tensor("logits", 4, 16), top3))
	add(refused("lp_kind_unknown.safetensors", "a logprobs_kind of processed_logits", `"logprobs_kind"`, "must be raw or processed", `"processed_logits"`),
		st(map[string]string{"op": "softmax", "logprobs_kind": "processed_logits"}, f32Tensor("logits", 4, 16), f32Tensor("logprobs", 4, 16)))
	// A per-row parameter in the metadata is one value for every row,
	// checked by the parameter table as a tensor's or a flag's is.
	add(refused("st_metadata_temperature.safetensors", "a temperature of -1 in the metadata", `metadata "temperature"`, "temperature must be", "not -1"),
		st(map[string]string{"op": "softmax", "temperature": "-1"}, f32Tensor("logits", 4, 16)))
	add(accepted("st_metadata_top_p.safetensors", "a top_p of 0.9 in the metadata, and keys sampviz does not read (judged, with notices)", 0),
		st(map[string]string{"op": "renorm", "top_p": "0.9", "note": "captured by hand", "engine_seeds": "{}"}, f32Tensor("logits", 4, 16)))
	// Without op metadata, a file with the inputs of two ops is read as the
	// one inference picks (spec_verify), the other's tensor named in a notice.
	add(accepted("st_ambiguous.safetensors", "no op metadata, and the inputs of both a softmax and a spec_verify", 0),
		st(nil, f32Tensor("logits", 4, 16), f32Tensor("target_logits", 4, 3, 16), engine.FromInts("draft_tokens", engine.I64, []int{4, 2}, []int64{1, 2, 3, 4, 5, 6, 7, 8})))

	// npz and npy containers, broken. logitsNPY is the member logits.npy of
	// the softmax above.
	logitsNPY := append(npyHeader("<f4", []int{4, 16}), data...)
	add(refused("npz_not_zip.npz", "a CSV file named .npz", "not a valid zip archive"),
		[]byte("token,logit\n0,1.5\n1,-0.25\n2,3.0\n3,0.0\n"))
	add(entry{File: "npz_traversal.npz", What: "an npz member named ../../../../tmp/x.npy beside logits (a name, never a path)",
		Exit: 0, Status: 201, Words: []string{}},
		rawZip(rawMember{name: "logits.npy", body: logitsNPY},
			rawMember{name: "../../../../tmp/sampviz_hostile_escape.npy", body: append(npyHeader("<f4", []int{4}), f32Bytes(1, 2, 3, 4)...)}))
	add(refused("npz_declared_huge.npz", "an npz member that declares 1 TiB inflated but holds 384 bytes", `"logits"`, "1099511627776"),
		rawZip(rawMember{name: "logits.npy", body: logitsNPY, deflate: true, size: 1 << 40}))
	// A deflated member the run uses is inflated into nothing before the
	// server accepts the upload, so that both faces refuse it alike.
	add(refused("npz_inflates_past.npz", "an npz member that declares 384 bytes but inflates to 16 MiB", `"logits"`, "inflates past its declared 384 bytes"),
		rawZip(rawMember{name: "logits.npy", body: append(append([]byte(nil), logitsNPY...), make([]byte, 16<<20)...), deflate: true, size: uint64(len(logitsNPY))}))
	add(refused("npz_crc_stored.npz", "a stored npz member whose bytes fail its CRC-32", `"logits"`, "CRC-32"),
		rawZip(rawMember{name: "logits.npy", body: logitsNPY, crcXor: 1}))
	add(refused("npz_crc_deflated.npz", "a deflated npz member whose bytes fail its CRC-32", `"logits"`, "fails its CRC-32 check"),
		rawZip(rawMember{name: "logits.npy", body: logitsNPY, deflate: true, crcXor: 1}))
	add(accepted("npz_crc_unused.npz", "a deflated member the run does not use, whose bytes fail its CRC-32, beside good logits", 0),
		rawZip(rawMember{name: "logits.npy", body: logitsNPY},
			rawMember{name: "notes.npy", body: append(npyHeader("<f4", []int{4}), f32Bytes(1, 2, 3, 4)...), deflate: true, crcXor: 1}))
	add(refused("npz_zip64_records.npz", "a zip64 end record that declares 2^62 members", "not a valid zip archive"),
		zip64Lie(rawZip(rawMember{name: "logits.npy", body: logitsNPY})))
	add(refused("npz_empty.npz", "an npz without members (np.savez with nothing)", `"logits"`, "not found; a dump holds logits, or target_logits for spec_verify", "the file holds no tensors"),
		rawZip())
	add(refused("npy_bad_magic.npy", "an .npy whose magic is wrong", "not an npy array"),
		append([]byte("\x93NUMPZ"), logitsNPY[6:]...))
	add(refused("npy_object.npy", "an .npy of pickled Python objects ('|O')", "pickled Python objects"),
		append(npyHeader("|O", []int{4}), []byte("\x80\x02cposix\nsystem\nq\x00X\x1e\x00\x00\x00touch /tmp/sampviz_hostile_pwnedq\x01\x85q\x02Rq\x03.")...))
	add(refused("npy_python_expr.npy", "an .npy header holding a Python expression that runs a command", "not a Python dict literal"),
		npyWithDict("{'descr': __import__('os').system('touch /tmp/sampviz_hostile_pwned'), 'fortran_order': False, 'shape': (4, 16), }", data))
	add(refused("npy_fortran_big.npy", "a Fortran-order .npy declaring [100000, 100000]", "fortran_order"),
		npyWithDict("{'descr': '<f4', 'fortran_order': True, 'shape': (100000, 100000), }", data))

	// .pt files (torch.save): pickles that ask for code, or flood the
	// unpickler, and archives that lack what the pickle names.
	logitsPT := ptTensor{name: "logits", class: "FloatStorage", key: "0", numel: 64, size: []int{4, 16}, stride: []int{16, 1}}
	goodPKL := tensorDict(logitsPT)
	store0 := ptMember{"archive/data/0", data}
	pkl := func(b []byte) ptMember { return ptMember{"archive/data.pkl", b} }
	const pwn = "touch /tmp/sampviz_hostile_pwned"
	add(refused("pt_os_system.pt", "a .pt pickle that calls os.system (GLOBAL posix.system)", "posix.system", "nothing in it was run"),
		ptZip(pkl((&pickler{}).op(0x80, 2).global("posix", "system").str(pwn).op(0x85, 'R', '.').Bytes()), store0))
	add(refused("pt_builtins_eval.pt", "a .pt pickle that calls builtins.eval (STACK_GLOBAL, protocol 4)", "builtins.eval", "nothing in it was run"),
		ptZip(pkl((&pickler{}).op(0x80, 4).short("builtins").short("eval").op(0x93).str("__import__('os').system('"+pwn+"')").op(0x85, 'R', '.').Bytes()), store0))
	add(refused("pt_truncated.pt", "a .pt whose pickle is cut off before STOP", "truncated"),
		ptZip(pkl(goodPKL[:len(goodPKL)-40]), store0))
	add(refused("pt_missing_storage.pt", "a .pt whose pickle names a storage the archive lacks", `"logits"`, "archive/data/0"),
		ptZip(pkl(goodPKL)))
	// A memo index of 2^32-1 (an array of 4 G entries in CPython's
	// unpickler) beside a valid tensor dict.
	add(entry{File: "pt_memo_index.pt", What: "a .pt pickle that memoizes at index 2^32-1", Exit: 0, Status: 201, Words: []string{}},
		ptZip(pkl(append((&pickler{}).op(0x80, 2, '}', 'r', 0xff, 0xff, 0xff, 0xff).Bytes(), goodPKL[3:]...)), store0))
	// 75000 memo entries (EMPTY_LIST, LONG_BINPUT, POP) in half a megabyte.
	memo := (&pickler{}).op(0x80, 2)
	for i := range 75000 {
		memo.op(']', 'r', byte(i), byte(i>>8), byte(i>>16), 0, '0')
	}
	add(refused("pt_memo_flood.pt", "a .pt pickle that fills the memo with 75000 lists and holds no tensor", `"logits"`, "not found", "the file holds no tensors"),
		ptZip(pkl(memo.op('}', '.').Bytes())))
	add(refused("pt_stack_flood.pt", "a .pt pickle that pushes 500000 empty lists", "holds a list"),
		ptZip(pkl(append(append([]byte{0x80, 2}, bytes.Repeat([]byte{']'}, 500000)...), '.'))))
	// The unpickler takes about 300 bytes of memory per open MARK: 1.5 MB
	// of them would take 450 MB, so MARKs may nest 1000 deep, whatever the
	// budget (a broken file, not a big one).
	add(refused("pt_mark_flood.pt", "a .pt pickle of 1.5 million MARKs", "archive/data.pkl", "nests MARKs more than 1000 deep"),
		ptZip(pkl(append(append([]byte{0x80, 2}, bytes.Repeat([]byte{'('}, 1500000)...), ')', '.'))))
	// A million empty dicts in 1 MB: the scan's estimate of the
	// unpickler's memory (about 250 bytes each) is over the budget.
	add(entry{File: "pt_dict_flood.pt", What: "a .pt pickle of a million empty dicts (about 250 MB unpickled)", Exit: 2, Status: 413,
		Words: []string{"pt_dict_flood.pt needs about", "of memory to read (unpickling archive/data.pkl", "more than the 256 MiB allowed (--max-memory)"}},
		ptZip(pkl(append(append([]byte{0x80, 2}, bytes.Repeat([]byte{'}'}, 1000000)...), '.'))))
	// A list that holds itself 64 times is a tree of 64^17 lists to a walk
	// that does not remember the lists it has seen: ignored with a notice.
	self := (&pickler{}).op(0x80, 2, '}').str("history").op(']', 'q', 0, '(')
	for range 64 {
		self.op('h', 0)
	}
	add(entry{File: "pt_self_list.pt", What: "a .pt whose dict holds, beside logits, a list that holds itself 64 times", Exit: 0, Status: 201, Words: []string{}},
		ptZip(pkl(append(self.op('e', 's').Bytes(), goodPKL[3:]...)), store0))

	// Dumps that read well but break the format's logic.
	draft := func(v ...int64) *engine.Tensor {
		return engine.FromInts("draft_tokens", engine.I64, []int{2, len(v) / 2}, v)
	}
	add(refused("spec_draft_oov.safetensors", "spec_verify draft tokens past the vocabulary (8, 1000 with V = 8)", `"draft_tokens"`, "outside the vocabulary"),
		st(map[string]string{"op": "spec_verify"}, f32Tensor("target_logits", 2, 3, 8), draft(1, 8, 1000, 2)))
	add(refused("spec_shape_mismatch.safetensors", "spec_verify target logits for K = 4 with 3 draft tokens a row", `"draft_tokens"`, "does not fit"),
		st(map[string]string{"op": "spec_verify"}, f32Tensor("target_logits", 2, 5, 8), draft(1, 2, 3, 4, 5, 6)))
	add(refused("zero_rows.safetensors", "logits of [0, 16]: no rows", `"logits"`, "[0, 16]"),
		st(map[string]string{"op": "softmax"}, f32Tensor("logits", 0, 16)))
	add(refused("vocab_zero.safetensors", "logits of [4, 0]: no vocabulary", `"logits"`, "[4, 0]"),
		st(map[string]string{"op": "softmax"}, f32Tensor("logits", 4, 0)))
	add(refused("logits_1d.safetensors", "logits of one row without its batch dimension", `"logits"`, "batch dimension"),
		st(map[string]string{"op": "softmax"}, f32Tensor("logits", 16)))
	add(refused("probs_wrong_shape.safetensors", "softmax probs of [4, 15] for logits of [4, 16]", `"probs"`, "does not fit"),
		st(map[string]string{"op": "softmax"}, f32Tensor("logits", 4, 16), f32Tensor("probs", 4, 15)))
	// Output token ids past the vocabulary are the output's fault: judged,
	// and the verdict fails.
	samples := make([]int64, 4*64)
	for i := range samples {
		samples[i] = int64(i % 20) // 16 to 19 lie past V = 16
	}
	samples[7], samples[70] = -1, 1<<40
	add(entry{File: "samples_past_vocab.safetensors", What: "sample draws past the vocabulary (16 to 19, -1 and 2^40 with V = 16)",
		Args: []string{"--draws", "1000"}, Query: "draws=1000", Exit: 1, Status: 201, Words: []string{}},
		st(map[string]string{"op": "sample"}, f32Tensor("logits", 4, 16), engine.FromInts("samples", engine.I64, []int{4, 64}, samples)))

	// Token ids are int32 in the kernels: one past it is refused as the
	// dump is read, naming the tensor, never by a backend mid-run.
	ids := engine.FromInts("input_ids", engine.I64, []int{2, 6}, []int64{1, 2, 3, 1, 2, 3, 7, 9, 1 << 40, 5, 6, 7})
	add(refused("ngram_ids_int32.safetensors", "ngram_match prompt token ids past int32", `"input_ids"`, "row 1, position 2 holds token 1099511627776", "does not fit in int32"),
		st(map[string]string{"op": "ngram_match", "max_draft_tokens": "4"}, ids,
			engine.FromInts("input_ids_len", engine.I64, []int{2}, []int64{6, 6}),
			engine.FromInts("pre_ids", engine.I64, []int{2, 3}, []int64{1, 2, 3, 3, 7, 9}),
			engine.FromInts("step_idx", engine.I64, []int{2}, []int64{3, 3})))

	// FastDeploy's per-row state is checked as the dump is read, under
	// ngram_semantics fastdeploy: shapes that disagree with the batch,
	// negative lengths, draft counts past the draft buffer, a current
	// token past pre_ids.
	fd := func(extra ...*engine.Tensor) []*engine.Tensor {
		return append([]*engine.Tensor{
			engine.FromInts("input_ids", engine.I64, []int{2, 4}, []int64{1, 2, 3, 4, 1, 2, 3, 4}),
			engine.FromInts("input_ids_len", engine.I64, []int{2}, []int64{4, 4}),
			engine.FromInts("pre_ids", engine.I64, []int{2, 3}, []int64{9, 2, 0, 9, 2, 0}),
			engine.FromInts("step_idx", engine.I64, []int{2}, []int64{1, 1}),
		}, extra...)
	}
	fdMeta := map[string]string{"op": "ngram_match", "ngram_semantics": "fastdeploy", "max_draft_tokens": "4", "threshold": "128"}
	add(refused("fd_seq_lens_shape.safetensors", "FastDeploy ngram_match with seq_lens_decoder of 3 rows for a batch of 2", `"seq_lens_decoder"`, "shape [3]"),
		st(fdMeta, fd(engine.FromInts("seq_lens_decoder", engine.I32, []int{3}, []int64{1, 1, 1}))...))
	add(refused("fd_negative_len.safetensors", "FastDeploy ngram_match with a negative seq_lens_encoder", `"seq_lens_encoder"`, "row 1 is -3", "non-negative"),
		st(fdMeta, fd(engine.FromInts("seq_lens_encoder", engine.I32, []int{2}, []int64{0, -3}))...))
	add(refused("fd_draft_num_past_buffer.safetensors", "FastDeploy ngram_match with draft_token_num past max_draft_tokens", `"draft_token_num"`, "row 0 is 9", "outside [0, 4]"),
		st(fdMeta, fd(engine.FromInts("draft_token_num", engine.I32, []int{2}, []int64{9, 4}))...))
	add(refused("fd_max_dec_len_negative.safetensors", "FastDeploy ngram_match with a negative max_dec_len", `"max_dec_len"`, "row 1 is -1", "length cap"),
		st(fdMeta, fd(engine.FromInts("max_dec_len", engine.I64, []int{2}, []int64{64, -1}))...))
	add(refused("fd_step_past_pre_ids.safetensors", "FastDeploy ngram_match whose current token pre_ids[step_idx] lies past pre_ids", `"step_idx"`, "row 0 is 3", "must be below 3"),
		st(fdMeta, engine.FromInts("input_ids", engine.I64, []int{2, 4}, []int64{1, 2, 3, 4, 1, 2, 3, 4}),
			engine.FromInts("input_ids_len", engine.I64, []int{2}, []int64{4, 4}),
			engine.FromInts("pre_ids", engine.I64, []int{2, 3}, []int64{9, 2, 0, 9, 2, 0}),
			engine.FromInts("step_idx", engine.I64, []int{2}, []int64{3, 1})))
	hybridMeta := map[string]string{"op": "ngram_match", "ngram_semantics": "fastdeploy_hybrid", "max_draft_tokens": "4"}
	add(refused("fd_hybrid_without_mtp.safetensors", "FastDeploy hybrid_mtp_ngram without seq_lens_this_time", `"seq_lens_this_time"`, "not found", "fastdeploy_hybrid needs it"),
		st(hybridMeta, fd()...))
	add(refused("fd_hybrid_mtp_past_buffer.safetensors", "FastDeploy hybrid_mtp_ngram with more MTP tokens than the draft buffer holds", `"seq_lens_this_time"`, "row 1 is 7", "outside [0, 5]"),
		st(hybridMeta, fd(engine.FromInts("seq_lens_this_time", engine.I32, []int{2}, []int64{1, 7}))...))

	// NaN and ±Inf are data to show, not errors: judged (each such row a
	// finding, so the verdict fails), and the run ends.
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	hard := f32Tensor("logits", 4, 16)
	for i, v := range map[int]float32{3: nan, 16 + 5: inf, 32 + 7: -inf, 32 + 8: -inf} {
		binary.LittleEndian.PutUint32(hard.Data[4*i:], math.Float32bits(v))
	}
	for i := 48; i < 64; i++ {
		binary.LittleEndian.PutUint32(hard.Data[4*i:], math.Float32bits(nan))
	}
	add(accepted("nan_inf.safetensors", "softmax logits holding NaN, +Inf, -Inf and a row all NaN", 1), st(map[string]string{"op": "softmax"}, hard))
	masked := f32Tensor("logits", 4, 16)
	for i := 16; i < 32; i++ {
		binary.LittleEndian.PutUint32(masked.Data[4*i:], math.Float32bits(-inf))
	}
	add(accepted("neginf_row.safetensors", "softmax logits with a row all -Inf", 1), st(map[string]string{"op": "softmax"}, masked))
	add(entry{File: "sample_nan.safetensors", What: "rejection sampling from logits holding NaN, +Inf and a row all NaN",
		Args: []string{"--method", "rejection", "--draws", "1000"}, Query: "method=rejection&draws=1000", Exit: 1, Status: 201, Words: []string{}},
		st(map[string]string{"op": "sample"}, hard))
	hardSpec := f32Tensor("target_logits", 2, 3, 8)
	for i, v := range map[int]float32{2: nan, 9: inf} {
		binary.LittleEndian.PutUint32(hardSpec.Data[4*i:], math.Float32bits(v))
	}
	for i := 24; i < 48; i++ {
		binary.LittleEndian.PutUint32(hardSpec.Data[4*i:], math.Float32bits(-inf))
	}
	add(entry{File: "spec_nan.safetensors", What: "spec_verify over target logits holding NaN, +Inf and a row all -Inf",
		Args: []string{"--trials", "100"}, Query: "trials=100", Exit: 1, Status: 201, Words: []string{}},
		st(map[string]string{"op": "spec_verify"}, hardSpec, draft(1, 2, 3, 4)))

	// A careless user's files.
	add(refused("empty.safetensors", "an empty file", "the file is empty (0 bytes), not a dump"), nil)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(st(map[string]string{"op": "softmax"}, f32Tensor("logits", 4, 16)))
	zw.Close()
	add(refused("dump.safetensors.gz", "a gzipped safetensors file", "not a dump but a gzip-compressed file", "gunzip"), gz.Bytes())
}

// f32Tensor is an F32 tensor of shape whose values are a small pattern.
func f32Tensor(name string, shape ...int) *engine.Tensor {
	n := 1
	for _, d := range shape {
		n *= d
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i%13)/4 - 1
	}
	return engine.FromFloat32s(name, engine.F32, shape, v)
}

// st writes tensors and meta as safetensors.
func st(meta map[string]string, tensors ...*engine.Tensor) []byte {
	var b bytes.Buffer
	if err := dump.WriteSafetensors(&b, tensors, meta); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// f32Bytes is float32 values as little-endian bytes.
func f32Bytes(v ...float32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

// rawMember is one member of a zip built by rawZip: body stored, or
// deflated; size, when set, is the inflated size the archive declares
// (else len(body)); crcXor, when set, spoils the declared CRC-32.
type rawMember struct {
	name    string
	body    []byte
	deflate bool
	size    uint64
	crcXor  uint32
}

// rawZip writes a zip of members whose headers say what the members say,
// true or not.
func rawZip(ms ...rawMember) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, m := range ms {
		h := &zip.FileHeader{Name: m.name, Method: zip.Store, CRC32: crc32.ChecksumIEEE(m.body) ^ m.crcXor, UncompressedSize64: uint64(len(m.body))}
		raw := m.body
		if m.deflate {
			var c bytes.Buffer
			fw, _ := flate.NewWriter(&c, flate.BestCompression)
			fw.Write(m.body)
			fw.Close()
			h.Method, raw = zip.Deflate, c.Bytes()
		}
		if m.size != 0 {
			h.UncompressedSize64 = m.size
		}
		h.CompressedSize64 = uint64(len(raw))
		w, err := zw.CreateRaw(h)
		if err != nil {
			panic(err)
		}
		w.Write(raw)
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// zip64Lie rewrites the end of a zip archive as zip64: a zip64 end record
// that declares 2^62 members in a directory of 2^62 bytes, its locator, and
// an end record that defers to it.
func zip64Lie(z []byte) []byte {
	end := bytes.LastIndex(z, []byte("PK\x05\x06"))
	dirSize := binary.LittleEndian.Uint32(z[end+12:])
	dirOffset := binary.LittleEndian.Uint32(z[end+16:])
	out := append([]byte(nil), z[:end]...)
	rec := len(out)
	out = append(out, "PK\x06\x06"...)
	out = binary.LittleEndian.AppendUint64(out, 44)
	out = binary.LittleEndian.AppendUint16(out, 45)
	out = binary.LittleEndian.AppendUint16(out, 45)
	out = binary.LittleEndian.AppendUint32(out, 0)
	out = binary.LittleEndian.AppendUint32(out, 0)
	out = binary.LittleEndian.AppendUint64(out, 1<<62)
	out = binary.LittleEndian.AppendUint64(out, 1<<62)
	out = binary.LittleEndian.AppendUint64(out, 1<<62|uint64(dirSize))
	out = binary.LittleEndian.AppendUint64(out, uint64(dirOffset))
	out = append(out, "PK\x06\x07"...)
	out = binary.LittleEndian.AppendUint32(out, 0)
	out = binary.LittleEndian.AppendUint64(out, uint64(rec))
	out = binary.LittleEndian.AppendUint32(out, 1)
	out = append(out, "PK\x05\x06"...)
	out = binary.LittleEndian.AppendUint32(out, 0)
	out = binary.LittleEndian.AppendUint32(out, 0xffffffff)
	out = binary.LittleEndian.AppendUint32(out, 0xffffffff)
	out = binary.LittleEndian.AppendUint32(out, 0xffffffff)
	return binary.LittleEndian.AppendUint16(out, 0)
}

// npyWithDict is a version 1.0 npy of the header text dict, then data.
func npyWithDict(dict string, data []byte) []byte {
	dict += strings.Repeat(" ", (64-(10+len(dict)+1)%64)%64) + "\n"
	h := append([]byte("\x93NUMPY\x01\x00"), byte(len(dict)), byte(len(dict)>>8))
	return append(append(h, dict...), data...)
}

// pickler writes pickle opcodes as torch.save's pickler (protocol 2) does.
type pickler struct{ bytes.Buffer }

func (p *pickler) op(b ...byte) *pickler { p.Write(b); return p }

// str is BINUNICODE.
func (p *pickler) str(s string) *pickler {
	p.WriteByte('X')
	binary.Write(p, binary.LittleEndian, uint32(len(s)))
	p.WriteString(s)
	return p
}

// short is SHORT_BINUNICODE.
func (p *pickler) short(s string) *pickler {
	p.op(0x8c, byte(len(s)))
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

// ptTensor is one tensor of a pickled dict.
type ptTensor struct {
	name, class, key string
	numel, offset    int
	size, stride     []int
}

// tensorDict pickles {name: tensor, ...} as torch.save lays it out.
func tensorDict(ts ...ptTensor) []byte {
	p := &pickler{}
	p.op(0x80, 2, '}', '(')
	for _, t := range ts {
		p.str(t.name).global("torch._utils", "_rebuild_tensor_v2").op('(')
		p.op('(').str("storage").global("torch", t.class).str(t.key).str("cpu").int(t.numel).op('t', 'Q')
		p.int(t.offset).ints(t.size...).ints(t.stride...).op(0x89)
		p.global("collections", "OrderedDict").op(')', 'R', 't', 'R')
	}
	return p.op('u', '.').Bytes()
}

// ptMember is one stored member of a .pt archive.
type ptMember struct {
	name string
	body []byte
}

// ptZip builds a torch.save archive of stored members in order.
func ptZip(ms ...ptMember) []byte {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, m := range ms {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: m.name, Method: zip.Store})
		if err != nil {
			panic(err)
		}
		w.Write(m.body)
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return b.Bytes()
}
