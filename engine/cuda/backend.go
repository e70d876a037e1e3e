package cuda

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/sampviz/sampviz/engine"
)

var (
	_ engine.Backend = (*Backend)(nil)
	_ io.Closer      = (*Backend)(nil)
)

// WrapperEnv names an environment variable holding a command to run the
// worker under, such as "compute-sanitizer --tool memcheck" or "ncu": when
// set, Open's default command becomes that command followed by this
// executable and "worker".
const WrapperEnv = "SAMPVIZ_WORKER_WRAPPER"

// Defaults of Options.
const (
	DefaultWatchdog     = 60 * time.Second
	DefaultStartTimeout = 2 * time.Minute
	// DefaultBenchTimeout bounds one benchmark case.
	DefaultBenchTimeout = 5 * time.Minute
	// initialShared is the shared memory a new worker starts with; it grows
	// to fit the largest run.
	initialShared = 1 << 20
)

// Options configure Open.
type Options struct {
	// Kernels is the path of libsampviz_kernels.so.
	Kernels string
	// Device is the CUDA device number.
	Device int
	// Watchdog bounds one run, transfers included (default DefaultWatchdog).
	Watchdog time.Duration
	// StartTimeout bounds a worker's start: loading the library, creating
	// the CUDA context and measuring the copy bandwidth (default
	// DefaultStartTimeout).
	StartTimeout time.Duration
	// Command is the worker's executable and arguments; the default is this
	// executable with the argument "worker" (`sampviz worker`), after the
	// command in $SAMPVIZ_WORKER_WRAPPER if that is set.
	Command []string
	// Env is added to the worker's environment.
	Env []string
	// Stderr, when set, receives the worker's standard error as it comes;
	// its last lines are kept for error messages either way.
	Stderr io.Writer
	// Reason is reported as Device().Reason (why this backend was chosen).
	Reason string
}

// Backend runs ops on the GPU through a supervised worker process. It is
// safe for concurrent use; runs are served one at a time. Close stops the
// worker: a Backend holds a process and must be closed.
type Backend struct {
	countsDraws
	opts   Options
	mu     sync.Mutex
	proc   *proc
	device engine.Device
	l2     int64
	cc     string
	// treeKernel says that the worker's library has spec_tree_verify's
	// kernel (see errNoTreeKernel).
	treeKernel bool
	closed     bool
	nextID     uint64
	// deviceCount is what the worker's hello reported (0: not known).
	deviceCount int
	// planted is a fault the next Run asks its worker for before its
	// kernels (plantFault: the pool's fault tests).
	planted string
	// health is what GPUState reports; it has its own lock because b.mu
	// is held for a whole run.
	health health
}

// health is a worker's record: its GPU's name, its restarts and last fault,
// and why it could not start, when it could not.
type health struct {
	mu       sync.Mutex
	name     string
	restarts int
	fault    string
	faultAt  time.Time
	down     string
	downAt   time.Time
}

// Open starts a worker, loads the kernel library in it, binds the GPU and
// measures its copy bandwidth. It returns an error wrapping
// engine.ErrUnavailable when the library is missing or does not load, or
// when no GPU answers; the message says which.
func Open(ctx context.Context, opts Options) (*Backend, error) {
	b, err := newBackend(opts)
	if err != nil {
		return nil, err
	}
	if err := b.start(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

// newBackend returns a backend with opts' defaults whose worker is not
// started yet (start, or the first Run, starts it). It fails as Open does
// when the library is missing.
func newBackend(opts Options) (*Backend, error) {
	if opts.Watchdog <= 0 {
		opts.Watchdog = DefaultWatchdog
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	if opts.Kernels == "" {
		return nil, fmt.Errorf("cuda: no kernel library given: %w", engine.ErrUnavailable)
	}
	if _, err := os.Stat(opts.Kernels); err != nil {
		return nil, fmt.Errorf("cuda: %s was not found: %w", opts.Kernels, engine.ErrUnavailable)
	}
	if len(opts.Command) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("cuda: find the worker executable: %w", err)
		}
		opts.Command = append(strings.Fields(os.Getenv(WrapperEnv)), exe, "worker")
	}
	return &Backend{opts: opts}, nil
}

// start starts the worker unless it runs; when it cannot, the backend is
// down (health) and the error says why.
func (b *Backend) start(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, err := b.ensure(ctx)
	return err
}

// Name returns "cuda".
func (b *Backend) Name() string { return "cuda" }

var _ engine.DrawCounter = (*Backend)(nil)

// countsDraws is what every face of the cuda backend (Backend, Pool, a
// placed run) says of a sample run's draws, as an engine.DrawCounter.
type countsDraws struct{}

// DefaultDraws is engine.DefaultCountedDraws: the device counts a row's
// draws, so 10^7 a row cost counts of V integers and tens of milliseconds.
func (countsDraws) DefaultDraws() int { return engine.DefaultCountedDraws }

// MaxDraws is engine.MaxDraws.
func (countsDraws) MaxDraws() int { return engine.MaxDraws }

// Device describes the GPU: name, multiprocessors, memory and the
// device-to-device copy bandwidth measured when the worker started.
func (b *Backend) Device() engine.Device {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.device
}

// SetReason sets what Device().Reason reports.
func (b *Backend) SetReason(reason string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.opts.Reason = reason
	b.device.Reason = reason
}

// L2Bytes returns the GPU's L2 cache size.
func (b *Backend) L2Bytes() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.l2
}

// Run executes run.Op with the kernels and returns an Output named "cuda"
// whose Timing holds the device time between events around the launches,
// the bytes the op moves, and the wall time with transfers. Invalid inputs
// give the same errors as engine/cpu (wrapping engine.ErrUnsupported for
// malformed tensors); failures of the worker give a *WorkerError. A library
// built without the tree kernel (SV_TREE=0) refuses spec_tree_verify with
// engine.ErrUnsupported. It never writes to run's tensors.
func (b *Backend) Run(ctx context.Context, run *engine.Run) (*engine.Output, error) {
	return b.run(ctx, run, false)
}

// run is Run; inPlace (f32 softmax only) makes the kernel write the
// probabilities over its copy of the logits, for the tests.
func (b *Backend) run(ctx context.Context, run *engine.Run, inPlace bool) (*engine.Output, error) {
	start := time.Now()
	p, err := buildPlan(run)
	if err != nil {
		return nil, err
	}
	p.req.InPlace = inPlace
	b.mu.Lock()
	defer b.mu.Unlock()
	pr, err := b.ensure(ctx)
	if err != nil {
		return nil, err
	}
	if run.Op == engine.OpSpecTreeVerify && !b.treeKernel {
		return nil, errNoTreeKernel
	}
	if name := b.planted; name != "" {
		b.planted = ""
		if _, err := b.call(ctx, pr, &request{Kind: kindFault, Fault: name}, b.opts.Watchdog, run.Op); err != nil {
			return nil, err
		}
		if pr, err = b.ensure(ctx); err != nil {
			return nil, err
		}
	}
	if p.size > pr.shm.size() {
		if err := pr.shm.resize((p.size + initialShared - 1) / initialShared * initialShared); err != nil {
			return nil, fmt.Errorf("cuda: %w", err)
		}
	}
	for _, w := range p.writes {
		w.writeTo(pr.shm.data)
	}
	rep, err := b.call(ctx, pr, &request{Kind: kindRun, Run: &p.req}, b.opts.Watchdog, run.Op)
	if err != nil {
		return nil, err
	}
	out := p.decode(pr.shm.data)
	out.Name = "cuda"
	out.Timing = &engine.Timing{Kernel: time.Duration(rep.Run.KernelNS), Bytes: p.bytes, Wall: time.Since(start)}
	return out, nil
}

// CopyBandwidth measures the device-to-device copy bandwidth again (bytes
// read plus bytes written per second).
func (b *Backend) CopyBandwidth(ctx context.Context) (float64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	pr, err := b.ensure(ctx)
	if err != nil {
		return 0, err
	}
	rep, err := b.call(ctx, pr, &request{Kind: kindCopyBW}, b.opts.Watchdog, "")
	if err != nil {
		return 0, err
	}
	return rep.CopyBandwidth, nil
}

// Bench times one benchmark case on the GPU (see BenchCase).
func (b *Backend) Bench(ctx context.Context, c BenchCase) (*BenchResult, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	pr, err := b.ensure(ctx)
	if err != nil {
		return nil, err
	}
	rep, err := b.call(ctx, pr, &request{Kind: kindBench, Bench: &c}, max(b.opts.Watchdog, DefaultBenchTimeout), c.Op)
	if err != nil {
		return nil, err
	}
	if rep.Bench == nil {
		return nil, &WorkerError{Kind: ErrKernel, Op: c.Op, Detail: "empty benchmark reply"}
	}
	return rep.Bench, nil
}

// injectFault asks the worker to misbehave (the supervision tests): "crash",
// "hang", and on the GPU "out_of_bounds" and "spin", on the fake device
// "error" and "sticky".
func (b *Backend) injectFault(ctx context.Context, name string, timeout time.Duration) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	pr, err := b.ensure(ctx)
	if err != nil {
		return err
	}
	_, err = b.call(ctx, pr, &request{Kind: kindFault, Fault: name}, timeout, "fault")
	return err
}

// plantFault makes the next Run fail as a kernel would: its worker is
// asked for fault name ("out_of_bounds" on the GPU, "sticky" on the fake
// device; see injectFault) in place of that run's kernels (the pool's tests
// and the two-GPU test).
func (b *Backend) plantFault(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.planted = name
}

// workerPID returns the running worker's process id, or 0 (the tests).
func (b *Backend) workerPID() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.proc == nil {
		return 0
	}
	return b.proc.cmd.Process.Pid
}

// Close stops the worker. Runs after Close fail with ErrClosed.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	if b.proc == nil {
		return nil
	}
	pr := b.proc
	b.proc = nil
	b.nextID++
	if err := pr.enc.Encode(&request{ID: b.nextID, Kind: kindShutdown, ShmSize: pr.shm.size()}); err == nil {
		select {
		case <-pr.exited:
		case <-time.After(5 * time.Second):
		}
	}
	pr.kill()
	return nil
}

// ensure returns the running worker, starting one (and greeting it) when
// there is none. b.mu is held.
func (b *Backend) ensure(ctx context.Context) (*proc, error) {
	if b.closed {
		return nil, ErrClosed
	}
	if b.proc != nil {
		return b.proc, nil
	}
	pr, err := startProc(b.opts)
	if err != nil {
		we := &WorkerError{Kind: engine.ErrUnavailable, Detail: err.Error()}
		b.health.setDown(we.Error())
		return nil, we
	}
	rep, err := b.call(ctx, pr, &request{Kind: kindHello, Hello: &helloRequest{Kernels: b.opts.Kernels, Device: b.opts.Device}},
		b.opts.StartTimeout, "")
	if err != nil {
		pr.kill()
		var we *WorkerError
		if errors.As(err, &we) && (errors.Is(we.Kind, ErrCrashed) || errors.Is(we.Kind, ErrHung) || errors.Is(we.Kind, ErrKernel)) {
			we.Detail = "starting the worker: " + we.Detail
			we.Kind = engine.ErrUnavailable
		}
		b.proc = nil
		if we != nil && we.devices > 0 {
			b.deviceCount = we.devices
		}
		b.health.setDown(err.Error())
		return nil, err
	}
	h := rep.Hello
	b.device = engine.Device{
		Backend:       "cuda",
		Name:          h.Name,
		SMs:           h.SMs,
		MemoryBytes:   h.MemoryBytes,
		CopyBandwidth: h.CopyBandwidth,
		Reason:        b.opts.Reason,
	}
	b.l2, b.cc, b.treeKernel, b.deviceCount = h.L2Bytes, h.Capability, h.TreeKernel, h.DeviceCount
	b.health.up(h.Name)
	b.proc = pr
	return pr, nil
}

// call sends req and waits for its reply, the worker's death, the timeout
// or ctx. Every failure but an error the worker reports and survives kills
// the worker (b.proc becomes nil, and the next call starts a new one).
func (b *Backend) call(ctx context.Context, pr *proc, req *request, timeout time.Duration, op engine.Op) (*reply, error) {
	b.nextID++
	req.ID = b.nextID
	req.ShmSize = pr.shm.size()
	restart := func(kind error, detail string) error {
		pr.kill()
		we := &WorkerError{Kind: kind, Op: op, Detail: detail, Stderr: pr.stderr.String(), Restarted: true}
		if b.proc == pr {
			b.proc = nil
			b.health.restarted(we, ctx.Err() != nil)
		}
		return we
	}
	if err := pr.enc.Encode(req); err != nil {
		return nil, restart(ErrCrashed, fmt.Sprintf("send request: %v", err))
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case rep := <-pr.replies:
		if rep.ID != req.ID {
			return nil, restart(ErrCrashed, fmt.Sprintf("reply %d to request %d", rep.ID, req.ID))
		}
		if rep.Err != nil {
			kind := kindOf(rep.Err.Kind)
			if kind == ErrDeviceFault {
				return nil, restart(kind, rep.Err.Message)
			}
			return nil, &WorkerError{Kind: kind, Op: op, Detail: rep.Err.Message, devices: rep.Err.Devices}
		}
		return &rep, nil
	case err := <-pr.readErr:
		// The pipe closed: the worker is gone; wait briefly for its status.
		select {
		case <-pr.exited:
		case <-time.After(2 * time.Second):
		}
		return nil, restart(ErrCrashed, pr.exitDetail(err))
	case <-timer.C:
		return nil, restart(ErrHung, fmt.Sprintf("no answer within the %s watchdog", timeout))
	case <-ctx.Done():
		err := restart(ErrHung, "the run was cancelled")
		return nil, fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
}

// proc is one worker process and its pipes.
type proc struct {
	cmd     *exec.Cmd
	shm     *sharedMem
	reqW    *os.File
	repR    *os.File
	enc     *json.Encoder
	replies chan reply
	readErr chan error
	exited  chan struct{}
	waitErr error
	stderr  *tail
	once    sync.Once
}

func startProc(opts Options) (*proc, error) {
	shm, err := newSharedMem(initialShared)
	if err != nil {
		return nil, err
	}
	reqR, reqW, err := os.Pipe()
	if err != nil {
		shm.close()
		return nil, fmt.Errorf("pipe: %w", err)
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		shm.close()
		reqR.Close()
		reqW.Close()
		return nil, fmt.Errorf("pipe: %w", err)
	}
	pr := &proc{
		shm:     shm,
		reqW:    reqW,
		repR:    repR,
		enc:     json.NewEncoder(reqW),
		replies: make(chan reply, 1),
		readErr: make(chan error, 1),
		exited:  make(chan struct{}),
		stderr:  &tail{max: 4096},
	}
	cmd := exec.Command(opts.Command[0], opts.Command[1:]...)
	cmd.Env = append(append(os.Environ(), opts.Env...), protocolEnv+"="+protocolVersion)
	cmd.ExtraFiles = []*os.File{shm.f, reqR, repW} // fds 3, 4, 5
	var errOut io.Writer = pr.stderr
	if opts.Stderr != nil {
		errOut = io.MultiWriter(pr.stderr, opts.Stderr)
	}
	cmd.Stdout, cmd.Stderr = errOut, errOut
	if err := cmd.Start(); err != nil {
		shm.close()
		reqR.Close()
		reqW.Close()
		repR.Close()
		repW.Close()
		return nil, fmt.Errorf("start worker %s: %w", opts.Command[0], err)
	}
	reqR.Close()
	repW.Close()
	pr.cmd = cmd
	go func() {
		pr.waitErr = cmd.Wait()
		close(pr.exited)
	}()
	go func() {
		dec := json.NewDecoder(bufio.NewReader(repR))
		for {
			var rep reply
			if err := dec.Decode(&rep); err != nil {
				pr.readErr <- err
				return
			}
			pr.replies <- rep
		}
	}()
	return pr, nil
}

// kill ends the worker (if it still runs) and releases its resources.
func (p *proc) kill() {
	p.once.Do(func() {
		p.reqW.Close()
		select {
		case <-p.exited:
		default:
			p.cmd.Process.Kill()
			<-p.exited
		}
		p.repR.Close()
		p.shm.close()
	})
}

// exitDetail says how the worker ended.
func (p *proc) exitDetail(readErr error) string {
	select {
	case <-p.exited:
		if p.waitErr != nil {
			return fmt.Sprintf("the worker exited: %v", p.waitErr)
		}
		return "the worker exited with status 0"
	default:
		return fmt.Sprintf("the worker closed its reply pipe: %v", readErr)
	}
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}

// setDown records that the worker could not start, why and when.
func (h *health) setDown(why string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.down, h.downAt = why, time.Now()
}

// isDown reports whether the worker's last start failed.
func (h *health) isDown() bool {
	_, down := h.downSince()
	return down
}

// downSince returns when the worker's last start failed, and false when it
// is not down.
func (h *health) downSince() (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.downAt, h.down != ""
}

// up records a started worker on the GPU called name.
func (h *health) up(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.name, h.down = name, ""
}

// restarted records a killed worker; a cancelled run is a restart but no
// fault.
func (h *health) restarted(we *WorkerError, cancelled bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.restarts++
	if !cancelled {
		// The message without the worker's stderr: one sentence for a page.
		short := *we
		short.Stderr = ""
		h.fault, h.faultAt = short.Error(), time.Now()
	}
}

// state fills what st says of the worker's health: name, restarts, last
// fault, and down with its reason when it could not start.
func (h *health) state(st *engine.GPUState) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st.Name, st.Restarts, st.Fault, st.FaultAt = h.name, h.restarts, h.fault, h.faultAt
	if h.down != "" {
		st.State, st.Fault = engine.GPUDown, h.down
	}
}
