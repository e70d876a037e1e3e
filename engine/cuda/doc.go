// Package cuda is the CUDA backend: it runs the kernels of csrc/
// (libsampviz_kernels.so) in a worker process and implements
// engine.Backend.
//
// The worker is the sampviz binary itself started as `sampviz worker`
// (tests re-execute their own binary instead). It loads the library with
// dlopen through purego, so sampviz builds with CGO_ENABLED=0 and runs on
// machines without CUDA, where Open fails with engine.ErrUnavailable. The
// parent and the worker speak over two pipes in small JSON messages; tensors
// never go through a pipe: they move through a memfd shared-memory region
// that both processes map.
//
// The parent supervises the worker. A kernel fault that poisons the CUDA
// context (illegal address, launch failure), a crash, or a run that outlasts
// the watchdog fails that run with a typed *WorkerError (errors.Is
// ErrDeviceFault, ErrCrashed or ErrHung), the worker is killed, and the next
// run starts a fresh one. Errors the context survives (ErrKernel) leave the
// worker running.
//
// A host with several GPUs gets one worker per GPU: Pool holds a Backend
// per GPU, each worker bound to its device by the device number in its
// hello (so its CUDA context lives on that GPU alone). The first worker
// reports how many GPUs the CUDA runtime sees (sv_device_count, after
// CUDA_VISIBLE_DEVICES): the count comes from the same runtime that runs
// the kernels, with no cgo, no NVML and no nvidia-smi to parse, and the
// numbers are CUDA's (the order of CUDA_DEVICE_ORDER). Pool.Place puts a
// whole run (its kernels and seed reruns) on the GPU with the fewest runs
// placed; each GPU serves its runs one at a time, so a fault restarts that
// GPU's worker alone while the others' runs go on. Pool.GPUs reports each
// GPU's state (idle or busy with which run, restarts, last fault) for the
// home page. `sampviz serve --gpus 0,2` drives the GPUs named; `check` and
// `bench` use one GPU (--gpu N).
//
// Two environment variables serve testing and profiling. SAMPVIZ_WORKER_FAKE=1
// in a worker's environment replaces the kernel library with a fake device
// that serves argmax in Go (the supervision tests run without a GPU with
// it; SAMPVIZ_WORKER_FAKE_GPUS=N makes it a host of N GPUs and
// SAMPVIZ_WORKER_FAKE_DELAY a run take that long, for the pool's tests). SAMPVIZ_WORKER_WRAPPER (WrapperEnv) runs the worker under a tool such
// as compute-sanitizer or ncu, which must see the process that launches the
// kernels.
//
// Outside the fake device, this package never computes a result on the CPU,
// and it never judges one:
// engine/cpu is the CPU backend and engine/compare the judge. Outputs are
// poisoned on the device before every launch and checked afterwards, so an
// element a kernel forgot to write is an error, never a plausible number.
package cuda
