package dump

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzPT feeds arbitrary bytes named fuzz.pt to Parse and BuildRun, as the
// other readers' fuzz targets do (fuzzOne): the seeds are torch.save's own
// files from testdata/, cut short and with a byte flipped, and forged ones.
func FuzzPT(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.pt"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no .pt fixtures under testdata/ (%v)", err)
	}
	for _, file := range files {
		valid, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		flipped := bytes.Clone(valid)
		flipped[len(flipped)/3] ^= 0x20
		f.Add(valid)
		f.Add(valid[:len(valid)/2])
		f.Add(flipped)
	}
	logits := ptTensorSpec{name: "logits", class: "FloatStorage", key: "0", numel: 6, size: []int{2, 3}, stride: []int{3, 1}}
	pkl := tensorDict(logits)
	f.Add(ptZip(f, ptMember{name: "archive/data.pkl", body: pkl}, ptMember{name: "archive/data/0", body: f32Storage(6)}))
	f.Add(ptZip(f, ptMember{name: "archive/data.pkl", body: pkl}, ptMember{name: "archive/data/0", body: f32Storage(5)}))
	f.Add(ptZip(f, ptMember{name: "archive/data.pkl", body: (&pickler{}).op(0x80, 2).global("os", "system").str("x").op(0x85, 'R', '.').Bytes()}))
	f.Add(append(bytes.Clone(legacyTorchMagic), '.'))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzOne(t, "fuzz.pt", data) })
}
