// Package dump reads and writes sampviz dump files (DUMPS.md): safetensors,
// .npz archives of .npy members, and bare .npy arrays; it also reads
// torch.save's .pt archives (pt.go, never running their pickles) and folders
// of SGLang's dumper files (sglang.go). It turns a parsed File
// into an engine.Run: tensors found by name, shapes and dtypes checked, the op
// inferred and the sampling parameters resolved from defaults, metadata,
// tensors and overrides.
//
// Reading never copies what it can alias: Open memory-maps the file and the
// tensors' Data point into the mapping; only deflated npz members (inflated
// once, into their final buffer) and big-endian npy arrays (byte-swapped once)
// get buffers of their own. Every allocation is bounded by what the file
// actually holds, so no input can make the reader panic, hang or exhaust
// memory. Every malformed file gets one *Error that names the file, the
// tensor and the rule it broke.
//
// npy has no bf16: bf16 dumps must be safetensors (numpy users keep f32 or
// f16), and WriteNPY and WriteNPZ refuse BF16 tensors.
//
// The package never runs kernels, never computes references and never judges
// outputs: NaN and Inf inside float tensors are data, passed on untouched.
package dump
