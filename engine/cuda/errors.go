package cuda

import (
	"errors"
	"fmt"

	"github.com/sampviz/sampviz/engine"
)

// Sentinel errors of the worker and its kernels; a *WorkerError wraps one.
var (
	// ErrDeviceFault: a kernel left the CUDA context unusable (illegal
	// address, launch failure, trap). The worker was killed and the next run
	// starts a new one.
	ErrDeviceFault = errors.New("kernel fault on the GPU")
	// ErrCrashed: the worker process died (or closed its pipe) during a run.
	ErrCrashed = errors.New("GPU worker crashed")
	// ErrHung: a run outlasted the watchdog; the worker was killed.
	ErrHung = errors.New("GPU worker did not answer in time")
	// ErrKernel: a CUDA error the context survives (out of memory, a launch
	// the device refuses) or an output element a kernel did not write. The
	// worker keeps running.
	ErrKernel = errors.New("kernel error")
	// ErrClosed: the backend was closed.
	ErrClosed = errors.New("cuda backend closed")
)

// WorkerError is what a run that failed in or with the worker returns.
// Callers branch on Kind with errors.Is.
type WorkerError struct {
	// Kind is one of the sentinels above, engine.ErrUnsupported or
	// engine.ErrUnavailable.
	Kind error
	// Op is the op that was running ("" for start-up and control requests).
	Op engine.Op
	// Detail is what the worker, CUDA or the supervisor said.
	Detail string
	// Stderr is the end of the worker's standard error, when it crashed.
	Stderr string
	// Restarted says that the worker was killed and the next run starts a
	// fresh one.
	Restarted bool
	// devices is how many GPUs CUDA sees, as a worker that could not start
	// on its GPU reported it (0: not known).
	devices int
}

// Error says which op failed, how, whether the worker was restarted, and
// the end of the worker's standard error when it crashed.
func (e *WorkerError) Error() string {
	msg := e.Kind.Error()
	if e.Op != "" {
		msg = fmt.Sprintf("%s: %s", e.Op, msg)
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	if e.Restarted {
		msg += " (the worker was restarted)"
	}
	if e.Stderr != "" {
		msg += "; worker stderr: " + e.Stderr
	}
	return msg
}

// Unwrap returns Kind, so errors.Is(err, cuda.ErrHung) works.
func (e *WorkerError) Unwrap() error { return e.Kind }

// Wire error kinds: what the worker reports in a reply.
const (
	wireInvalid     = "invalid"
	wireCUDA        = "cuda"
	wireSticky      = "sticky"
	wireNoDevice    = "no_device"
	wireUnsupported = "unsupported"
	wireUnwritten   = "unwritten"
	wireLibrary     = "library"
)

// wireError is an error as it crosses the pipe.
type wireError struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
	// Devices is how many GPUs CUDA sees, when a hello fails on its GPU
	// and the count is known (0: not known), so that a pool can start the
	// others.
	Devices int `json:"devices,omitempty"`
}

func (e *wireError) Error() string { return e.Message }

// kindOf maps a wire kind to the sentinel a caller branches on.
func kindOf(kind string) error {
	switch kind {
	case wireSticky:
		return ErrDeviceFault
	case wireUnsupported:
		return engine.ErrUnsupported
	case wireNoDevice, wireLibrary:
		return engine.ErrUnavailable
	}
	return ErrKernel
}
