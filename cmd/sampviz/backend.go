package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/cuda"
)

// kernelLibrary is the file name of the CUDA kernels (make kernels).
const kernelLibrary = "libsampviz_kernels.so"

// kernelCandidates returns where to look for the kernel library, in order:
// $SAMPVIZ_KERNELS, next to this executable, ./build.
func kernelCandidates() []string {
	var paths []string
	if p := os.Getenv("SAMPVIZ_KERNELS"); p != "" {
		paths = append(paths, p)
	}
	if exe, err := os.Executable(); err == nil {
		paths = append(paths, filepath.Join(filepath.Dir(exe), kernelLibrary))
	}
	return append(paths, filepath.Join("build", kernelLibrary))
}

// findKernels returns the kernel library to load: kernels itself when set,
// else the first candidate that exists. The error names every place looked.
func findKernels(kernels string) (string, error) {
	if kernels != "" {
		if _, err := os.Stat(kernels); err != nil {
			return "", fmt.Errorf("%s was not found at %s", kernelLibrary, kernels)
		}
		return kernels, nil
	}
	paths := kernelCandidates()
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s was not found at %s (build it with `make kernels`, or set SAMPVIZ_KERNELS)",
		kernelLibrary, strings.Join(paths, ", "))
}

// openBackend returns the backend named name: "cpu", "cuda", or "auto"
// (cuda when the kernel library loads and a GPU answers, else cpu). kernels
// is the library's path; "" searches $SAMPVIZ_KERNELS, the executable's
// folder and ./build. The backend's Device().Reason says which backend was
// picked and why. The returned backend implements io.Closer and must be
// closed: the cuda backend holds a worker process. The cuda backend runs
// on GPU gpu (check's --gpu; 0 elsewhere).
func openBackend(name, kernels string, gpu int) (engine.Backend, error) {
	switch name {
	case "cpu":
		return withReason{cpu.New(), "--backend cpu"}, nil
	case "cuda":
		b, err := openCUDA(kernels, "--backend cuda", gpu)
		if err != nil {
			return nil, fmt.Errorf("--backend cuda: %w", err)
		}
		return b, nil
	case "auto", "":
		b, err := openCUDA(kernels, "", gpu)
		if err != nil {
			return withReason{cpu.New(), "--backend auto: cpu, because " + err.Error()}, nil
		}
		return b, nil
	}
	return nil, fmt.Errorf("unknown backend %q (want auto, cpu or cuda)", name)
}

// openCUDA starts the CUDA backend on GPU gpu; reason "" means "--backend
// auto: cuda (device)".
func openCUDA(kernels, reason string, gpu int) (*cuda.Backend, error) {
	return openWorkers(kernels, reason, func(ctx context.Context, opts cuda.Options) (*cuda.Backend, error) {
		opts.Device = gpu
		return cuda.Open(ctx, opts)
	})
}

// reasoned is a CUDA backend that carries the reason it was chosen
// (cuda.Backend, cuda.Pool).
type reasoned interface {
	Device() engine.Device
	SetReason(string)
}

// openWorkers is openCUDA's and openPool's common part: it finds the
// kernel library, opens the backend through open within the workers'
// three minutes to start, words a backend that no GPU answers for, and
// gives reason "" its "--backend auto: cuda (device)" form.
func openWorkers[B reasoned](kernels, reason string, open func(context.Context, cuda.Options) (B, error)) (B, error) {
	var none B
	path, err := findKernels(kernels)
	if err != nil {
		return none, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b, err := open(ctx, cuda.Options{Kernels: path, Reason: reason})
	if err != nil {
		if errors.Is(err, engine.ErrUnavailable) && !errors.Is(err, cuda.ErrNoGPU) {
			return none, fmt.Errorf("no GPU answered through %s: %v", path, err)
		}
		return none, err
	}
	if reason == "" {
		d := b.Device()
		b.SetReason(fmt.Sprintf("--backend auto: cuda (%s, %d SMs)", d.Name, d.SMs))
	}
	return b, nil
}

// withReason is a backend whose Device carries the reason it was chosen.
type withReason struct {
	engine.Backend
	reason string
}

// Device returns the backend's device with Reason set.
func (w withReason) Device() engine.Device {
	d := w.Backend.Device()
	d.Reason = w.reason
	return d
}

// Close closes the backend when it holds resources.
func (w withReason) Close() error {
	if c, ok := w.Backend.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
