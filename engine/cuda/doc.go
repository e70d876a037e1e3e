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
// Two environment variables serve testing and profiling. SAMPVIZ_WORKER_FAKE=1
// in a worker's environment replaces the kernel library with a fake device
// that serves argmax in Go (the supervision tests run without a GPU with
// it). SAMPVIZ_WORKER_WRAPPER (WrapperEnv) runs the worker under a tool such
// as compute-sanitizer or ncu, which must see the process that launches the
// kernels.
//
// Outside the fake device, this package never computes a result on the CPU,
// and it never judges one:
// engine/cpu is the CPU backend and engine/compare the judge. Outputs are
// poisoned on the device before every launch and checked afterwards, so an
// element a kernel forgot to write is an error, never a plausible number.
package cuda
