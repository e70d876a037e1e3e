package cuda

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"unsafe"

	"github.com/sampviz/sampviz/engine"
)

// fakeEnv, set to 1 in a worker's environment, replaces the kernel library
// with a fake device that serves argmax in Go: the supervision tests run on
// machines without a GPU with it.
const fakeEnv = "SAMPVIZ_WORKER_FAKE"

// executor is what serves requests inside the worker: the kernel library
// (gpuExec) or the fake device (fakeExec).
type executor interface {
	hello(h *helloRequest) (*helloReply, error)
	run(r *runRequest, shm []byte) (*runReply, error)
	bench(c *BenchCase) (*BenchResult, error)
	copyBandwidth() (float64, error)
	fault(name string) error
	// pin and unpin register the shared memory with the driver, around
	// every remapping.
	pin(shm []byte)
	unpin()
}

// WorkerMain serves the parent that started this process as its CUDA worker
// (`sampviz worker`, or a test binary re-executed by the tests) and returns
// the process exit code. It reads requests from file descriptor 4, answers
// on 5, and maps the tensors of file 3. It returns when the parent closes
// the request pipe or asks it to shut down.
func WorkerMain() int {
	if os.Getenv(protocolEnv) != protocolVersion {
		fmt.Fprintln(os.Stderr, "sampviz worker: started without its pipes; a sampviz server starts it, not a person")
		return 2
	}
	shmFile := os.NewFile(fdShared, "sampviz-tensors")
	reqs := os.NewFile(fdRequests, "sampviz-requests")
	reps := os.NewFile(fdReplies, "sampviz-replies")
	// CUDA's current context is per OS thread: keep every call on one.
	runtime.LockOSThread()
	w := &worker{shmFile: shmFile, out: json.NewEncoder(reps)}
	if err := w.serve(bufio.NewReader(reqs)); err != nil {
		fmt.Fprintln(os.Stderr, "sampviz worker:", err)
		return 1
	}
	return 0
}

type worker struct {
	shmFile *os.File
	shm     *sharedMem
	exec    executor
	out     *json.Encoder
}

func (w *worker) serve(in io.Reader) error {
	dec := json.NewDecoder(in)
	for {
		var req request
		if err := dec.Decode(&req); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read request: %w", err)
		}
		rep := w.handle(&req)
		rep.ID = req.ID
		if err := w.out.Encode(rep); err != nil {
			return fmt.Errorf("write reply: %w", err)
		}
		if req.Kind == kindShutdown {
			return nil
		}
	}
}

// fail turns an error into a reply's wire error.
func fail(err error) *reply {
	var we *wireError
	if errors.As(err, &we) {
		return &reply{Err: we}
	}
	return &reply{Err: &wireError{Kind: wireInvalid, Message: err.Error()}}
}

func (w *worker) handle(req *request) *reply {
	if req.Kind == kindShutdown {
		return &reply{}
	}
	if req.Kind == kindHello {
		if req.Hello == nil {
			return fail(errors.New("hello without parameters"))
		}
		if os.Getenv(fakeEnv) == "1" {
			w.exec = &fakeExec{}
		} else {
			lib, err := loadLibrary(req.Hello.Kernels)
			if err != nil {
				return fail(&wireError{Kind: wireLibrary, Message: err.Error()})
			}
			w.exec = newGPUExec(lib)
		}
		h, err := w.exec.hello(req.Hello)
		if err != nil {
			return fail(err)
		}
		return &reply{Hello: h}
	}
	if w.exec == nil {
		return fail(errors.New("request before hello"))
	}
	if err := w.mapShared(req.ShmSize); err != nil {
		return fail(err)
	}
	switch req.Kind {
	case kindRun:
		if req.Run == nil {
			return fail(errors.New("run without parameters"))
		}
		for name, s := range req.Run.In {
			if err := w.inBounds(name, s); err != nil {
				return fail(err)
			}
		}
		for name, s := range req.Run.Out {
			if err := w.inBounds(name, s); err != nil {
				return fail(err)
			}
		}
		r, err := w.exec.run(req.Run, w.shared())
		if err != nil {
			return fail(err)
		}
		return &reply{Run: r}
	case kindBench:
		if req.Bench == nil {
			return fail(errors.New("bench without a case"))
		}
		r, err := w.exec.bench(req.Bench)
		if err != nil {
			return fail(err)
		}
		return &reply{Bench: r}
	case kindCopyBW:
		bw, err := w.exec.copyBandwidth()
		if err != nil {
			return fail(err)
		}
		return &reply{CopyBandwidth: bw}
	case kindFault:
		return w.fault(req.Fault)
	}
	return fail(fmt.Errorf("unknown request kind %q", req.Kind))
}

// fault is the test hook: "crash" exits at once, "hang" never answers, the
// rest go to the executor (the library's out-of-bounds and spinning
// kernels, or the fake device's errors).
func (w *worker) fault(name string) *reply {
	switch name {
	case "crash":
		fmt.Fprintln(os.Stderr, "sampviz worker: crashing on purpose (fault injection)")
		os.Exit(3)
	case "hang":
		select {}
	}
	if err := w.exec.fault(name); err != nil {
		return fail(err)
	}
	return &reply{}
}

func (w *worker) shared() []byte {
	if w.shm == nil {
		return nil
	}
	return w.shm.data
}

// mapShared follows the parent's resizes of the shared memory.
func (w *worker) mapShared(size int64) error {
	if w.shm != nil && w.shm.size() == size {
		return nil
	}
	if w.shm != nil {
		w.exec.unpin()
	}
	if w.shm == nil {
		m, err := openSharedMem(w.shmFile, size)
		if err != nil {
			return err
		}
		w.shm = m
	} else if err := w.shm.remap(size); err != nil {
		return err
	}
	if len(w.shm.data) > 0 {
		w.exec.pin(w.shm.data)
	}
	return nil
}

func (w *worker) inBounds(name string, s slot) error {
	if s.Off < 0 || s.Bytes < 0 || s.Off+s.Bytes > int64(len(w.shared())) {
		return fmt.Errorf("slot %s [%d, +%d) outside the %d bytes of shared memory", name, s.Off, s.Bytes, len(w.shared()))
	}
	return nil
}

// gpuExec runs requests on the device through the kernel library.
type gpuExec struct {
	lib    *library
	bufs   map[string]*devBuf
	pinned unsafe.Pointer
	info   helloReply
}

type devBuf struct {
	h   uint64
	cap int64
}

func newGPUExec(lib *library) *gpuExec { return &gpuExec{lib: lib, bufs: map[string]*devBuf{}} }

func (g *gpuExec) hello(h *helloRequest) (_ *helloReply, err error) {
	defer func() {
		// How many GPUs there are, when CUDA still says: a pool starts the
		// others beside a GPU that cannot start.
		var we *wireError
		if errors.As(err, &we) && g.lib.deviceCount != nil {
			var count int32
			if g.lib.deviceCount(&count) == svOK {
				we.Devices = int(count)
			}
		}
	}()
	if err := g.lib.check(g.lib.init(int32(h.Device)), "init"); err != nil {
		return nil, err
	}
	var (
		name          [256]byte
		sms, maj, mnr int32
		memBytes, l2  uint64
	)
	if err := g.lib.check(g.lib.deviceInfo(&name[0], int32(len(name)), &sms, &memBytes, &l2, &maj, &mnr), "device info"); err != nil {
		return nil, err
	}
	if err := g.lib.check(g.lib.eventsReserve(2), "events"); err != nil {
		return nil, err
	}
	n := 0
	for n < len(name) && name[n] != 0 {
		n++
	}
	g.info = helloReply{
		Name:        string(name[:n]),
		SMs:         int(sms),
		MemoryBytes: int64(memBytes),
		L2Bytes:     int64(l2),
		Capability:  fmt.Sprintf("%d.%d", maj, mnr),
		TreeKernel:  g.lib.specTreeVerify != nil,
	}
	if g.lib.deviceCount != nil {
		var count int32
		if err := g.lib.check(g.lib.deviceCount(&count), "device count"); err != nil {
			return nil, err
		}
		g.info.DeviceCount = int(count)
	}
	bw, err := g.copyBandwidth()
	if err != nil {
		return nil, err
	}
	g.info.CopyBandwidth = bw
	info := g.info
	return &info, nil
}

// copyBandwidthBytes is the buffer size of the copy-bandwidth probe: far
// beyond any L2, so the copies measure device memory.
const copyBandwidthBytes = 512 << 20

func (g *gpuExec) copyBandwidth() (float64, error) {
	var bw float64
	if err := g.lib.check(g.lib.copyBandwidth(copyBandwidthBytes, 20, &bw), "copy bandwidth"); err != nil {
		return 0, err
	}
	return bw, nil
}

func (g *gpuExec) pin(shm []byte) {
	p := unsafe.Pointer(&shm[0])
	if g.lib.hostRegister(p, uint64(len(shm))) == svOK {
		g.pinned = p
	}
}

func (g *gpuExec) unpin() {
	if g.pinned != nil {
		g.lib.hostUnregist(g.pinned)
		g.pinned = nil
	}
}

func (g *gpuExec) fault(name string) error {
	switch name {
	case "out_of_bounds":
		if err := g.lib.check(g.lib.faultOOB(), "fault"); err != nil {
			return err
		}
	case "spin":
		if err := g.lib.check(g.lib.faultSpin(), "fault"); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown fault %q", name)
	}
	return g.lib.check(g.lib.synchronize(), "fault "+name)
}

// buffer returns the device buffer named name with room for n bytes,
// reallocating it when it is too small.
func (g *gpuExec) buffer(name string, n int64) (uint64, error) {
	if n < 256 {
		n = 256
	}
	b := g.bufs[name]
	if b != nil && b.cap >= n {
		return b.h, nil
	}
	if b != nil {
		if err := g.lib.check(g.lib.synchronize(), "synchronize"); err != nil {
			return 0, err
		}
		g.lib.free(b.h)
		delete(g.bufs, name)
	}
	var h uint64
	if err := g.lib.check(g.lib.malloc(uint64(n), &h), "allocate "+name); err != nil {
		return 0, err
	}
	g.bufs[name] = &devBuf{h: h, cap: n}
	return h, nil
}

func (g *gpuExec) run(r *runRequest, shm []byte) (*runReply, error) {
	in := map[string]uint64{}
	for name, s := range r.In {
		h, err := g.buffer("in:"+name, s.Bytes)
		if err != nil {
			return nil, err
		}
		if s.Bytes > 0 {
			if err := g.lib.check(g.lib.htod(h, unsafe.Pointer(&shm[s.Off]), uint64(s.Bytes)), "copy "+name+" to the device"); err != nil {
				return nil, err
			}
		}
		in[name] = h
	}
	out := map[string]uint64{}
	for name, s := range r.Out {
		h, err := g.buffer("out:"+name, s.Bytes)
		if err != nil {
			return nil, err
		}
		if s.Bytes > 0 {
			if err := g.lib.check(g.lib.fillU32(h, s.Poison, uint64(s.Bytes/4)), "poison "+name); err != nil {
				return nil, err
			}
		}
		out[name] = h
	}
	if err := g.lib.check(g.lib.eventRecord(0), "record event"); err != nil {
		return nil, err
	}
	if err := g.launch(r, in, out); err != nil {
		return nil, err
	}
	if err := g.lib.check(g.lib.eventRecord(1), "record event"); err != nil {
		return nil, err
	}
	if err := g.lib.check(g.lib.synchronize(), string(r.Op)); err != nil {
		return nil, err
	}
	var ms float32
	if err := g.lib.check(g.lib.eventElapsed(0, 1, &ms), "event time"); err != nil {
		return nil, err
	}
	for name, s := range r.Out {
		if s.Bytes == 0 {
			continue
		}
		if err := g.lib.check(g.lib.dtoh(unsafe.Pointer(&shm[s.Off]), out[name], uint64(s.Bytes)), "copy "+name+" to the host"); err != nil {
			return nil, err
		}
		if err := checkWritten(name, shm[s.Off:s.Off+s.Bytes], s.Poison); err != nil {
			return nil, err
		}
	}
	return &runReply{KernelNS: int64(float64(ms) * 1e6)}, nil
}

// checkWritten reports words of an output that still hold the poison.
func checkWritten(name string, b []byte, poison uint32) error {
	count, first := 0, -1
	for i := 0; i+4 <= len(b); i += 4 {
		if binary.LittleEndian.Uint32(b[i:]) == poison {
			if first < 0 {
				first = i / 4
			}
			count++
		}
	}
	if count > 0 {
		return &wireError{Kind: wireUnwritten, Message: fmt.Sprintf("the kernel left %d of %d elements of %s unwritten, first at element %d", count, len(b)/4, name, first)}
	}
	return nil
}

// launch calls the op's launcher on the device buffers.
func (g *gpuExec) launch(r *runRequest, in, out map[string]uint64) error {
	l := launchers[r.Op]
	if l == nil {
		return &wireError{Kind: wireUnsupported, Message: fmt.Sprintf("op %q", r.Op)}
	}
	return l(g.lib, r, in, out)
}

// launchers call each op's launcher of csrc/sampviz.h (one per op of the op
// table, engine.OpSpec) on the device buffers the plan named.
var launchers = map[engine.Op]func(l *library, r *runRequest, in, out map[string]uint64) error{
	engine.OpArgmax: func(l *library, r *runRequest, in, out map[string]uint64) error {
		return l.check(l.argmax(int32(r.DType), in["logits"], int32(r.Rows), int32(r.Vocab), 0, 0, 0, out["tokens"]), "argmax")
	},
	engine.OpSoftmax: func(l *library, r *runRequest, in, out map[string]uint64) error {
		rows, vocab := int32(r.Rows), int32(r.Vocab)
		if r.InPlace {
			// The probabilities overwrite the (f32) logits; copy them to the output slot.
			if err := l.check(l.softmax(int32(r.DType), in["logits"], rows, vocab, in["params"], in["logits"]), "softmax"); err != nil {
				return err
			}
			out["probs"] = in["logits"]
			return nil
		}
		return l.check(l.softmax(int32(r.DType), in["logits"], rows, vocab, in["params"], out["probs"]), "softmax")
	},
	engine.OpRenorm: func(l *library, r *runRequest, in, out map[string]uint64) error {
		return l.check(l.renorm(int32(r.DType), in["logits"], int32(r.Rows), int32(r.Vocab), in["params"], int32(r.Flags), out["probs"]), "renorm")
	},
	engine.OpSample: func(l *library, r *runRequest, in, out map[string]uint64) error {
		if counts, ok := out["sample_counts"]; ok {
			return l.check(l.sampleCounts(int32(r.DType), in["logits"], int32(r.Rows), int32(r.Vocab), in["params"], int32(r.Flags), in["rows"],
				int32(r.NGreedy), int32(r.NSampled), out["tokens"], int32(r.Draws), counts), "sample")
		}
		return l.check(l.sample(int32(r.DType), in["logits"], int32(r.Rows), int32(r.Vocab), in["params"], int32(r.Flags), in["rows"],
			int32(r.NGreedy), int32(r.NSampled), out["tokens"], int32(r.Draws), out["samples"]), "sample")
	},
	engine.OpSpecVerify: func(l *library, r *runRequest, in, out map[string]uint64) error {
		return l.check(l.specVerify(in["target"], int32(r.Rows), int32(r.K), int32(r.Vocab), in["params"], int32(r.Flags), in["drafts"],
			in["qprobs"], int32(r.Trials), out["spec_tokens"], out["emitted"], out["accepted"], int32(r.TraceTrials),
			out["trace"]), "spec_verify")
	},
	engine.OpSpecTreeVerify: func(l *library, r *runRequest, in, out map[string]uint64) error {
		if l.specTreeVerify == nil {
			return &wireError{Kind: wireUnsupported, Message: errNoTreeKernel.Error()}
		}
		return l.check(l.specTreeVerify(in["target"], int32(r.Rows), int32(r.Nodes), int32(r.Vocab), int32(r.Width), in["params"],
			int32(r.Flags), in["tree"], in["qprobs"], int32(r.Trials), out["tree_path"], out["tree_tokens"], out["tree_accepted"],
			int32(r.TraceTrials), out["trace"]), "spec_tree_verify")
	},
	engine.OpNgramMatch: func(l *library, r *runRequest, in, out map[string]uint64) error {
		if r.FastDeploy {
			hybrid := int32(0)
			if r.Hybrid {
				hybrid = 1
			}
			return l.check(l.ngramFD(in["input_ids"], int32(r.L), in["input_len"], in["pre_ids"], int32(r.M), in["step_idx"],
				in["seq_lens_encoder"], in["seq_lens_decoder"], in["seq_lens_this_time"], in["max_dec_len"], in["draft_token_num"],
				int32(r.Rows), int32(r.MaxNgram), int32(r.MinNgram), int32(r.MaxDraft), int64(r.Threshold), hybrid,
				out["draft_out"], out["seq_lens_this_time_out"]), "ngram_match")
		}
		return l.check(l.ngram(in["input_ids"], int32(r.L), in["input_len"], in["pre_ids"], int32(r.M), in["step_idx"],
			int32(r.Rows), int32(r.MaxNgram), int32(r.MaxDraft), int32(r.Threshold), out["draft_out"]), "ngram_match")
	},
}
