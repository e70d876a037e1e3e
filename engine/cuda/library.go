package cuda

import (
	"fmt"
	"unsafe"

	"github.com/ebitengine/purego"
)

// abiVersion is the SV_ABI_VERSION of csrc/sampviz.h this package speaks.
const abiVersion = 1

// Status codes of csrc/sampviz.h.
const (
	svOK          = 0
	svInvalid     = 1
	svCUDA        = 2
	svSticky      = 3
	svNoDevice    = 4
	svUnsupported = 5
)

// Flags of csrc/sampviz.h.
const (
	flagJoint            = 0x1
	flagLowestIndex      = 0x2
	methodShift          = 4
	flagInfInvalid       = 0x100
	flagHasFilters       = 0x200
	flagAllFast          = 0x400
	flagTopPOnly         = 0x800
	specTargetShift      = 16
	specDraftShift       = 20
	paramBytesPerRow     = 32
	methodAuto           = 0
	methodInverseCDF     = 1
	methodGumbel         = 2
	methodRejection      = 3
	svF32, svF16, svBF16 = 0, 1, 2
)

// library is libsampviz_kernels.so, loaded with dlopen and bound through
// purego; only the worker process loads it. Device memory is a uint64
// handle; host pointers passed in are shared memory or live only for the
// call, and the library keeps none of them.
type library struct {
	abiVersion    func() int32
	lastError     func() string
	init          func(device int32) int32
	deviceInfo    func(name *byte, nameLen int32, sms *int32, mem, l2 *uint64, ccMajor, ccMinor *int32) int32
	malloc        func(bytes uint64, handle *uint64) int32
	free          func(handle uint64) int32
	htod          func(dst uint64, src unsafe.Pointer, bytes uint64) int32
	dtoh          func(dst unsafe.Pointer, src uint64, bytes uint64) int32
	fillU32       func(dst uint64, value uint32, count uint64) int32
	hostRegister  func(p unsafe.Pointer, bytes uint64) int32
	hostUnregist  func(p unsafe.Pointer) int32
	synchronize   func() int32
	eventsReserve func(n int32) int32
	eventRecord   func(i int32) int32
	eventElapsed  func(i, j int32, ms *float32) int32
	delay         func(ns uint64) int32
	copyBandwidth func(bytes uint64, iters int32, bps *float64) int32
	fillRandom    func(dst uint64, dtype int32, count, seed uint64, scale float32) int32
	argmax        func(dtype int32, logits uint64, rows, vocab int32, rowIdx uint64, nIdx, flags int32, tokens uint64) int32
	softmax       func(dtype int32, logits uint64, rows, vocab int32, params, probs uint64) int32
	renorm        func(dtype int32, logits uint64, rows, vocab int32, params uint64, flags int32, probs uint64) int32
	sample        func(dtype int32, logits uint64, rows, vocab int32, params uint64, flags int32, rowIdx uint64, nGreedy, nSampled int32, tokens uint64, draws int32, samples uint64) int32
	sampleCounts  func(dtype int32, logits uint64, rows, vocab int32, params uint64, flags int32, rowIdx uint64, nGreedy, nSampled int32, tokens uint64, draws int32, counts uint64) int32
	specVerify    func(target uint64, rows, k, vocab int32, params uint64, flags int32, drafts, qprobs uint64, trials int32, tokens, emitted, accepted uint64, traceTrials int32, trace uint64) int32
	ngram         func(inputIDs uint64, l int32, inputLen, preIDs uint64, m int32, stepIdx uint64, rows, maxNgram, maxDraft, threshold int32, out uint64) int32
	ngramFD       func(inputIDs uint64, l int32, inputLen, preIDs uint64, m int32, stepIdx, encoder, decoder, thisTime, maxDecLen, draftNum uint64, rows, maxNgram, minNgram, maxDraft int32, threshold int64, hybrid int32, out, seqLens uint64) int32
	faultOOB      func() int32
	faultSpin     func() int32

	// specTreeVerify is nil where the library was built without the tree
	// kernel (make kernels SV_TREE=0).
	specTreeVerify func(target uint64, rows, nodes, vocab, width int32, params uint64, flags int32, tree, qprobs uint64, trials int32, path, tokens, accepted uint64, traceTrials int32, trace uint64) int32
	// deviceCount is nil in a library older than sv_device_count (the
	// worker then reports no count, and a pool drives only the GPUs named).
	deviceCount func(count *int32) int32
}

// loadLibrary dlopens path and binds every symbol; a missing symbol or a
// different ABI version is an error, never a panic.
func loadLibrary(path string) (*library, error) {
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	l := new(library)
	syms := []struct {
		fn   any
		name string
	}{
		{&l.abiVersion, "sv_abi_version"}, {&l.lastError, "sv_last_error"}, {&l.init, "sv_init"},
		{&l.deviceInfo, "sv_device_info"}, {&l.malloc, "sv_malloc"}, {&l.free, "sv_free"},
		{&l.htod, "sv_memcpy_htod"}, {&l.dtoh, "sv_memcpy_dtoh"}, {&l.fillU32, "sv_fill_u32"},
		{&l.hostRegister, "sv_host_register"}, {&l.hostUnregist, "sv_host_unregister"},
		{&l.synchronize, "sv_synchronize"}, {&l.eventsReserve, "sv_events_reserve"},
		{&l.eventRecord, "sv_event_record"}, {&l.eventElapsed, "sv_event_elapsed"}, {&l.delay, "sv_delay"},
		{&l.copyBandwidth, "sv_copy_bandwidth"}, {&l.fillRandom, "sv_fill_random"}, {&l.argmax, "sv_argmax"},
		{&l.softmax, "sv_softmax"}, {&l.renorm, "sv_renorm"}, {&l.sample, "sv_sample"}, {&l.sampleCounts, "sv_sample_counts"},
		{&l.specVerify, "sv_spec_verify"}, {&l.ngram, "sv_ngram_match"},
		{&l.ngramFD, "sv_ngram_fastdeploy"},
		{&l.faultOOB, "sv_fault_out_of_bounds"}, {&l.faultSpin, "sv_fault_spin"},
	}
	for _, s := range syms {
		sym, err := purego.Dlsym(h, s.name)
		if err != nil {
			return nil, fmt.Errorf("load %s: symbol %s: %w", path, s.name, err)
		}
		purego.RegisterFunc(s.fn, sym)
	}
	// Optional: a library built with SV_TREE=0 has no tree kernel, and the
	// backend refuses spec_tree_verify (Backend.Run).
	if sym, err := purego.Dlsym(h, "sv_spec_tree_verify"); err == nil {
		purego.RegisterFunc(&l.specTreeVerify, sym)
	}
	if sym, err := purego.Dlsym(h, "sv_device_count"); err == nil {
		purego.RegisterFunc(&l.deviceCount, sym)
	}
	if v := l.abiVersion(); v != abiVersion {
		return nil, fmt.Errorf("load %s: ABI version %d, want %d (rebuild with make kernels)", path, v, abiVersion)
	}
	return l, nil
}

// check turns a status into nil or a *wireError that says what failed.
func (l *library) check(status int32, what string) error {
	if status == svOK {
		return nil
	}
	kind := wireCUDA
	switch status {
	case svInvalid:
		kind = wireInvalid
	case svSticky:
		kind = wireSticky
	case svNoDevice:
		kind = wireNoDevice
	case svUnsupported:
		kind = wireUnsupported
	}
	return &wireError{Kind: kind, Message: fmt.Sprintf("%s: %s", what, l.lastError())}
}
