package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sampviz/sampviz/engine"
)

// fakeGPUsEnv and fakeDelayEnv shape the fake device for the pool's tests:
// how many GPUs it pretends the host has (1 when unset), and how long each
// run takes (a Go duration; none when unset), so that two runs can be in
// flight at once.
const (
	fakeGPUsEnv  = "SAMPVIZ_WORKER_FAKE_GPUS"
	fakeDelayEnv = "SAMPVIZ_WORKER_FAKE_DELAY"
	// fakeDownEnv lists the fake GPUs whose worker cannot start ("1" or
	// "0,2"), as a GPU whose context cannot be created: the hello fails,
	// telling how many GPUs there are.
	fakeDownEnv = "SAMPVIZ_WORKER_FAKE_DOWN"
)

// fakeExec is the worker's fake device (SAMPVIZ_WORKER_FAKE=1), for testing
// the supervision on machines without a GPU: it serves argmax in Go and
// turns the "error" and "sticky" faults into the errors a real device
// reports. It is never selected unless that variable is set.
type fakeExec struct {
	delay time.Duration
}

func (f *fakeExec) hello(h *helloRequest) (*helloReply, error) {
	count := 1
	if s := os.Getenv(fakeGPUsEnv); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s=%q is not a count of GPUs", fakeGPUsEnv, s)
		}
		count = n
	}
	if h.Device < 0 || h.Device >= count {
		return nil, &wireError{Kind: wireNoDevice, Message: fmt.Sprintf("init: no CUDA device %d (%d present)", h.Device, count), Devices: count}
	}
	if s := os.Getenv(fakeDownEnv); s != "" {
		for _, part := range strings.Split(s, ",") {
			if n, err := strconv.Atoi(strings.TrimSpace(part)); err == nil && n == h.Device {
				return nil, &wireError{Kind: wireCUDA, Devices: count,
					Message: fmt.Sprintf("init: fake GPU %d does not start (%s): all CUDA-capable devices are busy or unavailable", h.Device, fakeDownEnv)}
			}
		}
	}
	if s := os.Getenv(fakeDelayEnv); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return nil, fmt.Errorf("%s=%q is not a duration", fakeDelayEnv, s)
		}
		f.delay = d
	}
	return &helloReply{Name: "fake GPU (SAMPVIZ_WORKER_FAKE)", SMs: 1, Capability: "0.0", CopyBandwidth: 1e9, DeviceCount: count}, nil
}

func (f *fakeExec) run(r *runRequest, shm []byte) (*runReply, error) {
	time.Sleep(f.delay)
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

func (*fakeExec) bench(*BenchCase) (*BenchResult, error) {
	return nil, &wireError{Kind: wireUnsupported, Message: "the fake device does not benchmark"}
}

func (*fakeExec) copyBandwidth() (float64, error) { return 1e9, nil }

// fault fails as a kernel that ran for the run delay and then hit name.
func (f *fakeExec) fault(name string) error {
	time.Sleep(f.delay)
	switch name {
	case "error":
		return &wireError{Kind: wireCUDA, Message: "fault injected: out of memory"}
	case "sticky":
		return &wireError{Kind: wireSticky, Message: "fault injected: an illegal memory access was encountered"}
	}
	return fmt.Errorf("unknown fault %q", name)
}

func (*fakeExec) pin([]byte) {}
func (*fakeExec) unpin()     {}
