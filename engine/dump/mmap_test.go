package dump

import (
	"archive/zip"
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"unsafe"

	"github.com/sampviz/sampviz/engine"
)

// inside reports whether b lies within the memory of outer.
func inside(b, outer []byte) bool {
	if len(b) == 0 || len(outer) == 0 {
		return false
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(outer)))
	return p >= lo && p+uintptr(len(b)) <= lo+uintptr(len(outer))
}

// allocatedBy returns the bytes the heap handed out while fn ran.
func allocatedBy(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestOpenHoldsTheFileOnce proves Open copies no tensor data: the logits of a
// 16 MB dump alias the file's mapping and opening it allocates a few
// kilobytes. A deflated npz member is inflated once, into its final buffer.
func TestOpenHoldsTheFileOnce(t *testing.T) {
	rng := newRand(t)
	logits := engine.NewTensor("logits", engine.BF16, 64, 128256) // 16 MB
	for i := 0; i+8 <= len(logits.Data); i += 8 {
		v := rng.Uint64()
		for j := range 8 {
			logits.Data[i+j] = byte(v >> (8 * j))
		}
	}
	temps := randomTensor(rng, "temperature", engine.F32, 64)
	small := engine.NewTensor("logits", engine.F32, 64, 4096) // 1 MB, to deflate
	copy(small.Data, logits.Data)
	stored := engine.FromFloat32s("logits", engine.F32, []int{64, 4096}, randomFloats(rng, 64*4096))
	dir := t.TempDir()
	tests := []struct {
		name     string
		file     string
		data     []byte
		want     *engine.Tensor
		inflated bool
	}{
		{"safetensors", "big.safetensors", safetensorsBytes(t, map[string]string{"op": "softmax"}, temps, logits), logits, false},
		{"npz stored", "big.npz", npzBytes(t, nil, stored, temps), stored, false},
		{"npz deflated", "deflated.npz", zipOf(t, member{name: "logits.npy", content: npyBytes(t, small), method: zip.Deflate}), small, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, tt.file)
			if err := os.WriteFile(path, tt.data, 0o644); err != nil {
				t.Fatal(err)
			}
			var f *File
			var err error
			alloc := allocatedBy(func() {
				if f, err = Open(path); err == nil {
					err = f.Load("logits")
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got := f.Tensor("logits")
			size := uint64(len(got.Data))
			if !bytes.Equal(got.Data, tt.want.Data) {
				t.Fatal("logits differ from what was written")
			}
			if tt.inflated {
				if inside(got.Data, f.mapped) {
					t.Error("deflated logits alias the mapping")
				}
				if alloc < size || alloc > size+size/8+64<<10 {
					t.Errorf("inflating %d bytes allocated %d: want one buffer of the data's size", size, alloc)
				}
				t.Logf("inflated %d bytes of data with %d bytes allocated", size, alloc)
				return
			}
			if !inside(got.Data, f.mapped) {
				t.Error("logits do not alias the file's mapping")
			}
			if alloc > 64<<10 {
				t.Errorf("opening a %d-byte file allocated %d bytes", len(tt.data), alloc)
			}
			t.Logf("opened %d bytes with %d bytes allocated", len(tt.data), alloc)
		})
	}
}

func randomFloats(rng interface{ NormFloat64() float64 }, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(rng.NormFloat64()) + 0.5
	}
	return out
}

func TestParseAliasesItsInput(t *testing.T) {
	rng := newRand(t)
	lg := randomTensor(rng, "logits", engine.F32, 4, 33)
	for _, tt := range []struct {
		name string
		file string
		data []byte
	}{
		{"safetensors", "x.safetensors", safetensorsBytes(t, nil, lg)},
		{"npz", "x.npz", npzBytes(t, nil, lg)},
		{"npy", "x.npy", npyBytes(t, lg)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, err := parseAndLoad(tt.file, tt.data)
			if err != nil {
				t.Fatal(err)
			}
			if got := f.Tensor("logits"); !inside(got.Data, tt.data) || cap(got.Data) != len(got.Data) {
				t.Error("logits are not a capped slice of the parsed bytes")
			}
		})
	}
}

func TestCloseTwice(t *testing.T) {
	rng := newRand(t)
	path := filepath.Join(t.TempDir(), "x.safetensors")
	if err := os.WriteFile(path, safetensorsBytes(t, nil, randomTensor(rng, "logits", engine.F16, 2, 9)), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// BenchmarkOpenLlamaLogits opens a 512 x 128256 bf16 dump (131 MB), the size
// of one batch of Llama 3 logits, and builds its run.
func BenchmarkOpenLlamaLogits(b *testing.B) {
	logits := engine.NewTensor("logits", engine.BF16, 512, 128256)
	for i := range logits.Data {
		logits.Data[i] = byte(i*7 + i>>9)
	}
	path := filepath.Join(b.TempDir(), "llama.safetensors")
	out, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := WriteSafetensors(out, []*engine.Tensor{logits}, nil); err != nil {
		b.Fatal(err)
	}
	out.Close()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		run, f, err := Load(path, engine.Overrides{})
		if err != nil || run.Rows() != 512 {
			b.Fatal(err)
		}
		f.Close()
	}
}
