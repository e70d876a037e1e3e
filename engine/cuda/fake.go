package cuda

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/sampviz/sampviz/engine"
)

// fakeExec is the worker's fake device (SAMPVIZ_WORKER_FAKE=1), for testing
// the supervision on machines without a GPU: it serves argmax in Go and
// turns the "error" and "sticky" faults into the errors a real device
// reports. It is never selected unless that variable is set.
type fakeExec struct{}

func (fakeExec) hello(*helloRequest) (*helloReply, error) {
	return &helloReply{Name: "fake GPU (SAMPVIZ_WORKER_FAKE)", SMs: 1, Capability: "0.0", CopyBandwidth: 1e9}, nil
}

func (fakeExec) run(r *runRequest, shm []byte) (*runReply, error) {
	if r.Op != engine.OpArgmax {
		return nil, &wireError{Kind: wireUnsupported, Message: fmt.Sprintf("the fake device serves argmax, not %s", r.Op)}
	}
	in, out := r.In["logits"], r.Out["tokens"]
	dtype := map[int]engine.DType{svF32: engine.F32, svF16: engine.F16, svBF16: engine.BF16}[r.DType]
	x := &engine.Tensor{DType: dtype, Shape: []int{r.Rows, r.Vocab}, Data: shm[in.Off : in.Off+in.Bytes]}
	for row := 0; row < r.Rows; row++ {
		best, m := -1, float32(math.Inf(-1))
		for i := 0; i < r.Vocab; i++ {
			v := x.Float32(row*r.Vocab + i)
			if v != v {
				best = -1
				break
			}
			if v > m {
				best, m = i, v
			}
		}
		binary.LittleEndian.PutUint32(shm[out.Off+int64(4*row):], uint32(int32(best)))
	}
	return &runReply{KernelNS: 1000}, nil
}

func (fakeExec) bench(*BenchCase) (*BenchResult, error) {
	return nil, &wireError{Kind: wireUnsupported, Message: "the fake device does not benchmark"}
}

func (fakeExec) copyBandwidth() (float64, error) { return 1e9, nil }

func (fakeExec) fault(name string) error {
	switch name {
	case "error":
		return &wireError{Kind: wireCUDA, Message: "fault injected: out of memory"}
	case "sticky":
		return &wireError{Kind: wireSticky, Message: "fault injected: an illegal memory access was encountered"}
	}
	return fmt.Errorf("unknown fault %q", name)
}

func (fakeExec) pin([]byte) {}
func (fakeExec) unpin()     {}
