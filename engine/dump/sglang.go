package dump

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/nlpodyssey/gopickle/types"

	"github.com/sampviz/sampviz/engine"
)

// SGLang's debug dumper (sglang.srt.debug_utils.dumper, SGLANG_DUMPER_DIR)
// writes one torch.save file per dumped value into a folder
// sglang_dump_<time>, named by its keys joined with "___":
// forward_pass_id=3___rank=0___name=next_token_logits___dump_index=12.pt
// (dumper.py's `"___".join(f"{k}={v}" ...) + ".pt"`, read back the same way
// by its dump_loader.read_meta). openSGLangDir reads such a folder as one
// dump, by the rule DUMPS.md documents: the lowest rank, the latest forward
// pass of it, each file's `name` mapped to a DUMPS.md name (sglangNames, or
// kept as it is), per-row [B, 1] parameters read as [B].

// sglangNames maps the names of SGLang's sampler (layers/sampler.py, its
// SamplingBatchInfo's fields) to DUMPS.md's.
var sglangNames = map[string]string{
	"next_token_logits":    "logits",
	"temperatures":         "temperature",
	"top_ks":               "top_k",
	"top_ps":               "top_p",
	"min_ps":               "min_p",
	"sampling_seed":        "seed",
	"batch_next_token_ids": "tokens",
	"next_token_ids":       "tokens",
}

// perRowNames are the tensors DUMPS.md wants as [B] that SGLang keeps as
// [B, 1] (temperatures, for a broadcast division).
var perRowNames = []string{"temperature", "top_k", "top_p", "min_p", "seed", "offset", "tokens"}

// sglangFile is one dumper file: its keys and the tensor name it gives.
type sglangFile struct {
	base       string
	name       string // the DUMPS.md name
	pass, rank int
}

// parseSGLangName reads a dumper file name's keys, or says why it is not one.
func parseSGLangName(base string) (sglangFile, bool) {
	stem, ok := strings.CutSuffix(base, ".pt")
	if !ok {
		return sglangFile{}, false
	}
	f := sglangFile{base: base}
	for _, kv := range strings.Split(stem, "___") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return sglangFile{}, false
		}
		var err error
		switch k {
		case "name":
			f.name = v
		case "forward_pass_id":
			f.pass, err = strconv.Atoi(v)
		case "rank":
			f.rank, err = strconv.Atoi(v)
		}
		if err != nil {
			return sglangFile{}, false
		}
	}
	if f.name == "" {
		return sglangFile{}, false
	}
	if mapped, ok := sglangNames[f.name]; ok {
		f.name = mapped
	}
	return f, true
}

// openSGLangDir reads a folder of SGLang dumper files as one dump, each
// file's unpickling within limit bytes of memory. Its tensors alias the
// files' mappings, which Close releases.
func openSGLangDir(dir string, limit int64) (out *File, err error) {
	if limit <= 0 {
		limit = DefaultLoadLimit
	}
	name := baseName(dir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, &Error{File: name, Rule: "cannot read the folder", Err: err}
	}
	f := &File{Name: name, Format: PT, Meta: map[string]string{}, Limit: limit}
	var files []sglangFile
	var subdirs []string
	for _, e := range entries {
		switch {
		case e.IsDir() && strings.HasPrefix(e.Name(), "sglang_dump_"):
			subdirs = append(subdirs, e.Name())
		case e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".pt"):
			if sf, ok := parseSGLangName(e.Name()); ok {
				files = append(files, sf)
			} else {
				f.Notices = append(f.Notices, fmt.Sprintf("ignored %s: not named as SGLang's dumper names its files (key=value parts joined by ___, one of them name=)", e.Name()))
			}
		}
	}
	if len(files) == 0 {
		if len(subdirs) > 0 {
			return nil, fileError(name, "is a folder without SGLang dumper files, but holds the dumper's folders %s: give one of them", strings.Join(subdirs, ", "))
		}
		return nil, fileError(name, "is a folder without SGLang dumper files (NAME=VALUE___...___name=TENSOR.pt, as sglang.srt.debug_utils.dumper writes them)")
	}
	rank := slices.MinFunc(files, func(a, b sglangFile) int { return a.rank - b.rank }).rank
	var ranks, passes []int
	pass := -1 << 62
	for _, sf := range files {
		ranks = appendNew(ranks, sf.rank)
		if sf.rank == rank {
			passes = appendNew(passes, sf.pass)
			pass = max(pass, sf.pass)
		}
	}
	if len(ranks) > 1 {
		f.Notices = append(f.Notices, fmt.Sprintf("read rank %d of ranks %s: move another rank's files to a folder of their own to read them", rank, joinInts(ranks)))
	}
	if len(passes) > 1 {
		f.Notices = append(f.Notices, fmt.Sprintf("read forward pass %d, the latest of passes %s: move another pass's files to a folder of their own to read them", pass, joinInts(passes)))
	}
	f.Meta["source"] = fmt.Sprintf("SGLang dumper folder %s, forward pass %d, rank %d", name, pass, rank)

	var unmaps []func() error
	defer func() {
		if err != nil {
			for _, u := range unmaps {
				_ = u()
			}
		}
	}()
	byName := map[string]string{}
	for _, sf := range files {
		if sf.rank != rank || sf.pass != pass {
			continue
		}
		if other, dup := byName[sf.name]; dup {
			return nil, tensorError(name, sf.name, "is given by two files, %s and %s: keep one of them in the folder", other, sf.base)
		}
		byName[sf.name] = sf.base
		data, unmap, err := mapFile(filepath.Join(dir, sf.base))
		if err != nil {
			return nil, &Error{File: sf.base, Rule: "cannot read the file", Err: err}
		}
		unmaps = append(unmaps, unmap)
		t, notice, err := sglangTensor(sf, data, limit)
		if err != nil {
			return nil, err
		}
		if notice != "" {
			f.Notices = append(f.Notices, notice)
			continue
		}
		f.Tensors = append(f.Tensors, t)
	}
	sort.SliceStable(f.Tensors, func(i, j int) bool { return f.Tensors[i].Name < f.Tensors[j].Name })
	f.unmap = func() error {
		var first error
		for _, u := range unmaps {
			if err := u(); err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	return f, nil
}

// sglangTensor reads one dumper file: a tensor, or a dict holding one under
// "value". A file holding anything else plain gives a notice; a pickle that
// asks for more than tensors and plain containers is refused.
func sglangTensor(sf sglangFile, data []byte, limit int64) (*engine.Tensor, string, error) {
	r, err := openTorchZip(sf.base, data, limit)
	if err != nil {
		return nil, "", err
	}
	root, err := r.unpickle()
	if err != nil {
		return nil, "", err
	}
	if d, ok := root.(*types.Dict); ok {
		if v, ok := d.Get("value"); ok {
			root = v
		}
	}
	pt, ok := root.(*ptTensor)
	if !ok {
		return nil, fmt.Sprintf("ignored %s: it holds %s, not a tensor", sf.base, ptKind(root)), nil
	}
	t, err := r.tensor(sf.name, pt)
	if err != nil {
		return nil, "", err
	}
	if err := r.checkStorageOverlap(); err != nil {
		return nil, "", err
	}
	if len(t.Shape) == 2 && t.Shape[1] == 1 && slices.Contains(perRowNames, t.Name) {
		t.Shape = t.Shape[:1]
	}
	return t, "", nil
}

func appendNew(s []int, v int) []int {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

// joinInts writes sorted ints as "0, 1, 2".
func joinInts(v []int) string {
	v = slices.Clone(v)
	slices.Sort(v)
	parts := make([]string, len(v))
	for i, n := range v {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ", ")
}

// IsSGLangDir reports whether dir is an SGLang dumper folder: one whose
// files include a dumper file (key=value parts with a name, .pt). A folder
// of such files is one dump, not a folder of dumps.
func IsSGLangDir(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if e.Type().IsRegular() {
			if _, ok := parseSGLangName(e.Name()); ok {
				return true
			}
		}
	}
	return false
}
