package session

import "github.com/sampviz/sampviz/engine"

// placer is a backend over several devices (engine/cuda's Pool: one worker
// per GPU). Execute places each job once, so that its kernels and seed
// reruns run on one device, and releases the place when they are done.
type placer interface {
	engine.Backend
	// Place chooses the device that runs the job called label and returns
	// it as a backend; release frees the place, and may be called more than
	// once (the first call frees it). It never waits.
	Place(label string) (b engine.Backend, release func())
}

// gpuReporter is a backend that drives GPUs and tells what each is doing.
type gpuReporter interface {
	// GPUs reports one state per GPU.
	GPUs() []engine.GPUState
}

// GPUs reports the state of every GPU the session's backends drive (the
// home page and GET /api/gpus): which run each serves, its restarts and
// last fault. It is empty when no backend drives a GPU.
func (s *Session) GPUs() []engine.GPUState {
	var out []engine.GPUState
	for _, b := range s.backends {
		if r, ok := b.(gpuReporter); ok {
			out = append(out, r.GPUs()...)
		}
	}
	return out
}

// place puts a job called label on one device of b when b spreads jobs
// over several (placer); otherwise it returns b itself. release frees the
// place; calling it again does nothing.
func place(b engine.Backend, label string) (engine.Backend, func()) {
	if p, ok := b.(placer); ok {
		return p.Place(label)
	}
	return b, func() {}
}
