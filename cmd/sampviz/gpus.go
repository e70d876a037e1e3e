package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/cuda"
)

// gpuList is serve's --gpus: the CUDA device numbers to start a worker on,
// "0,2"; empty means every GPU the CUDA runtime sees.
type gpuList []int

func (g *gpuList) String() string {
	nums := make([]string, len(*g))
	for i, n := range *g {
		nums[i] = strconv.Itoa(n)
	}
	return strings.Join(nums, ",")
}

// Set parses "0,2": GPU numbers, 0 or more, each once.
func (g *gpuList) Set(s string) error {
	var list gpuList
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		n, err := strconv.Atoi(part)
		if err != nil || n < 0 {
			return fmt.Errorf("%q is not a GPU number (want numbers from 0, such as 0,2)", part)
		}
		for _, m := range list {
			if m == n {
				return fmt.Errorf("GPU %d is named twice", n)
			}
		}
		list = append(list, n)
	}
	*g = list
	return nil
}

// gpuNumber is check's and bench's --gpu: the one CUDA device a run or a
// benchmark uses.
type gpuNumber int

func (g *gpuNumber) String() string { return strconv.Itoa(int(*g)) }

// Set parses a GPU number, 0 or more.
func (g *gpuNumber) Set(s string) error {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 {
		return fmt.Errorf("%q is not a GPU number (want 0, 1, ...)", s)
	}
	*g = gpuNumber(n)
	return nil
}

// openPool starts one CUDA worker per GPU of gpus (nil: every GPU), for
// serve; reason "" means "--backend auto: cuda (device)". A GPU number the
// host does not have wraps cuda.ErrNoGPU.
func openPool(kernels, reason string, gpus []int) (*cuda.Pool, error) {
	return openWorkers(kernels, reason, func(ctx context.Context, opts cuda.Options) (*cuda.Pool, error) {
		return cuda.OpenPool(ctx, opts, gpus)
	})
}

// serveBackend opens serve's backend: "cpu", or for "cuda" and "auto" one
// worker per GPU of gpus (nil: every GPU), serving on the GPUs whose worker
// starts (the others are down, cuda.Pool says why); "auto" falls back to
// the CPU when no GPU's worker starts, but not when --gpus names a GPU the
// host lacks.
func serveBackend(name, kernels string, gpus []int) (engine.Backend, error) {
	switch name {
	case "cpu":
		if gpus != nil {
			return nil, errors.New("--gpus picks the GPUs of the cuda backend; --backend cpu runs on none")
		}
		return withReason{cpu.New(), "--backend cpu"}, nil
	case "cuda":
		p, err := openPool(kernels, "--backend cuda", gpus)
		if err != nil {
			return nil, fmt.Errorf("--backend cuda: %w", err)
		}
		return p, nil
	case "auto", "":
		p, err := openPool(kernels, "", gpus)
		if errors.Is(err, cuda.ErrNoGPU) {
			return nil, fmt.Errorf("--gpus: %w", err)
		}
		if err != nil {
			return withReason{cpu.New(), "--backend auto: cpu, because " + err.Error()}, nil
		}
		return p, nil
	}
	return nil, fmt.Errorf("unknown backend %q (want auto, cpu or cuda)", name)
}
