package cuda

import "github.com/sampviz/sampviz/engine"

// The worker's file descriptors: the parent passes them as exec.Cmd
// ExtraFiles, in this order.
const (
	fdShared   = 3 // the shared-memory file
	fdRequests = 4 // parent -> worker, one JSON request per line
	fdReplies  = 5 // worker -> parent, one JSON reply per line
)

// protocolEnv is set to protocolVersion in the worker's environment by its
// parent; a worker started any other way refuses to run.
const (
	protocolEnv     = "SAMPVIZ_WORKER_PROTOCOL"
	protocolVersion = "1"
)

// Request kinds.
const (
	kindHello    = "hello"    // load the library, bind the device, measure the copy bandwidth
	kindRun      = "run"      // run one op on tensors in shared memory
	kindBench    = "bench"    // time one op on device-resident random inputs
	kindCopyBW   = "copy_bw"  // measure the device-to-device copy bandwidth again
	kindFault    = "fault"    // test hook: misbehave on purpose
	kindShutdown = "shutdown" // exit cleanly
)

// request is one message from the parent. Tensors are never in it: slots
// point into the shared memory, whose current size is ShmSize.
type request struct {
	ID      uint64        `json:"id"`
	Kind    string        `json:"kind"`
	ShmSize int64         `json:"shm_size"`
	Hello   *helloRequest `json:"hello,omitempty"`
	Run     *runRequest   `json:"run,omitempty"`
	Bench   *BenchCase    `json:"bench,omitempty"`
	Fault   string        `json:"fault,omitempty"`
}

type helloRequest struct {
	Kernels string `json:"kernels"`
	Device  int    `json:"device"`
}

// reply answers the request with the same ID; Err is set when it failed.
type reply struct {
	ID            uint64       `json:"id"`
	Err           *wireError   `json:"err,omitempty"`
	Hello         *helloReply  `json:"hello,omitempty"`
	Run           *runReply    `json:"run,omitempty"`
	Bench         *BenchResult `json:"bench,omitempty"`
	CopyBandwidth float64      `json:"copy_bandwidth,omitempty"`
}

type helloReply struct {
	Name          string  `json:"name"`
	SMs           int     `json:"sms"`
	MemoryBytes   int64   `json:"memory_bytes"`
	L2Bytes       int64   `json:"l2_bytes"`
	Capability    string  `json:"capability"`
	CopyBandwidth float64 `json:"copy_bandwidth"`
	// TreeKernel says that the library has spec_tree_verify's kernel (it
	// is built without it under SV_TREE=0).
	TreeKernel bool `json:"tree_kernel,omitempty"`
	// DeviceCount is how many GPUs the worker's CUDA runtime sees
	// (cudaGetDeviceCount, after CUDA_VISIBLE_DEVICES); 0 from a library
	// without sv_device_count.
	DeviceCount int `json:"device_count,omitempty"`
}

// slot is a byte range of the shared memory. Output slots are filled with
// Poison (a 32-bit pattern no kernel writes) on the device before the
// launch, and every word is checked afterwards.
type slot struct {
	Off    int64  `json:"off"`
	Bytes  int64  `json:"bytes"`
	Poison uint32 `json:"poison,omitempty"`
}

// Poison patterns: a NaN whose payload kernels never produce, token -2, and
// for drafted ids (which copy arbitrary input ids) the most negative id but one.
const (
	poisonFloat = 0x7fc00001
	poisonToken = 0xfffffffe
	poisonDraft = 0x80000001
)

// runRequest is one op in the kernels' terms (csrc/sampviz.h).
type runRequest struct {
	Op          engine.Op       `json:"op"`
	DType       int             `json:"dtype"`
	QDType      int             `json:"qdtype"`
	Rows        int             `json:"rows"`
	Vocab       int             `json:"vocab"`
	K           int             `json:"k"`
	Nodes       int             `json:"nodes,omitempty"`
	Width       int             `json:"width,omitempty"`
	Trials      int             `json:"trials"`
	TraceTrials int             `json:"trace_trials"`
	Draws       int             `json:"draws"`
	NGreedy     int             `json:"n_greedy"`
	NSampled    int             `json:"n_sampled"`
	L           int             `json:"l"`
	M           int             `json:"m"`
	MaxNgram    int             `json:"max_ngram"`
	MaxDraft    int             `json:"max_draft"`
	Threshold   int             `json:"threshold"`
	Flags       int             `json:"flags"`
	InPlace     bool            `json:"in_place,omitempty"`
	In          map[string]slot `json:"in"`
	Out         map[string]slot `json:"out"`
	// FastDeploy picks ngram_match's kernel under FastDeploy's rules
	// (sv_ngram_fastdeploy); Hybrid its fastdeploy_hybrid variant, which
	// tries n down to MinNgram.
	FastDeploy bool `json:"fastdeploy,omitempty"`
	Hybrid     bool `json:"hybrid,omitempty"`
	MinNgram   int  `json:"min_ngram,omitempty"`
}

type runReply struct {
	// KernelNS is the device time between events recorded around the launches.
	KernelNS int64 `json:"kernel_ns"`
}
