package webtest

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/dump"
)

// WriteDump writes tensors and meta as a safetensors dump called name in a
// fresh temporary folder of t and returns its path.
func WriteDump(t testing.TB, name string, tensors []*engine.Tensor, meta map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	if err := dump.WriteSafetensors(&buf, tensors, meta); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
