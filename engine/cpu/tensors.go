package cpu

import (
	"encoding/binary"
	"math"

	"github.com/sampviz/sampviz/engine"
)

// logitsShape checks run.Logits and returns its rows and vocabulary size.
func logitsShape(run *engine.Run) (rows, vocab int, err error) {
	if err := engine.CheckTensor(run.Logits, "logits", 2, true); err != nil {
		return 0, 0, err
	}
	return run.Logits.Dim(0), run.Logits.Dim(1), nil
}

// putFloats writes v as F32 into t starting at element start.
func putFloats(t *engine.Tensor, start int, v []float32) {
	b := t.Data[4*start : 4*(start+len(v))]
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
}

// putInt32 writes v as element i of the I32 tensor t.
func putInt32(t *engine.Tensor, i int, v int32) {
	binary.LittleEndian.PutUint32(t.Data[4*i:], uint32(v))
}
