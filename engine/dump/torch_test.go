package dump

import (
	"bytes"
	"encoding/binary"
	"flag"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// torchLayout builds, byte by byte, the file that
//
//	safetensors.torch.save_file({
//	    "logits": bf16 [2, 4], "temperature": f32 [2], "top_p": f32 [2], "top_k": i64 [2],
//	}, path, metadata={"op": "renorm", "format": "pt"})
//
// writes: the header length as a little-endian u64; a compact JSON header
// with "__metadata__" first and then the tensors in the order of their data,
// which the reference implementation sorts by dtype, widest first, then by
// name (so top_k, then temperature and top_p alphabetically, then logits);
// spaces that pad the header to a multiple of 8 bytes; the data.
func torchLayout() []byte {
	header := `{"__metadata__":{"format":"pt","op":"renorm"},` +
		`"top_k":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},` +
		`"temperature":{"dtype":"F32","shape":[2],"data_offsets":[16,24]},` +
		`"top_p":{"dtype":"F32","shape":[2],"data_offsets":[24,32]},` +
		`"logits":{"dtype":"BF16","shape":[2,4],"data_offsets":[32,48]}}`
	header += strings.Repeat(" ", (8-len(header)%8)%8)
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint64(len(header)))
	b.WriteString(header)
	binary.Write(&b, binary.LittleEndian, []int64{5, 0})
	binary.Write(&b, binary.LittleEndian, []float32{0.7, 0})
	binary.Write(&b, binary.LittleEndian, []float32{0.9, 1})
	// bf16: 1, -2, +inf, 0.25 | NaN, -inf, 3.140625, -0.5
	binary.Write(&b, binary.LittleEndian, []uint16{0x3f80, 0xc000, 0x7f80, 0x3e80, 0x7fc0, 0xff80, 0x4049, 0xbf00})
	return b.Bytes()
}

func TestPyTorchLayout(t *testing.T) {
	path := filepath.Join("testdata", "torch_layout.safetensors")
	want := torchLayout()
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	onDisk, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(onDisk, want) {
		t.Fatalf("%s differs from the layout built by hand (run with -update)", path)
	}
	run, f, err := Load(path, engine.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Format != Safetensors || f.Meta["format"] != "pt" || run.Op != engine.OpRenorm {
		t.Errorf("format %s, meta %v, op %s", f.Format, f.Meta, run.Op)
	}
	names := []string{}
	for _, tensor := range f.Tensors {
		names = append(names, tensor.Name)
	}
	if !slices.Equal(names, []string{"top_k", "temperature", "top_p", "logits"}) {
		t.Errorf("tensors %v, want header order", names)
	}
	lg := run.Logits
	if lg.DType != engine.BF16 || !slices.Equal(lg.Shape, []int{2, 4}) {
		t.Fatalf("logits %s %s", lg.DType, lg.ShapeString())
	}
	wantLogits := []float64{1, -2, math.Inf(1), 0.25, math.NaN(), math.Inf(-1), 3.140625, -0.5}
	for i, w := range wantLogits {
		if got := lg.Float(i); got != w && !(math.IsNaN(got) && math.IsNaN(w)) {
			t.Errorf("logits[%d] = %v, want %v", i, got, w)
		}
	}
	p := run.Params
	if !slices.Equal(p.TopK, []int{5, 0}) || !slices.Equal(p.TopP, []float64{float64(float32(0.9)), 1}) ||
		!slices.Equal(p.Temperature, []float64{float64(float32(0.7)), 0}) {
		t.Errorf("params top_k %v, top_p %v, temperature %v", p.TopK, p.TopP, p.Temperature)
	}
}
