package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cuda"
	"github.com/sampviz/sampviz/engine/dump"
)

const fakePeers = "testdata/peers_fake.sh"

// TestPeerSession runs the stand-in script (sh, no python) through the
// protocol: the hello, a case's reply with its inputs file, and an error
// for a case whose file is gone.
func TestPeerSession(t *testing.T) {
	s, err := startPeers("sh", fakePeers, []string{"ready"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Hello.Torch != "2.9.0-fake" || s.Hello.Triton != "" || !s.Hello.Compile {
		t.Errorf("hello %+v", s.Hello)
	}
	inputs := filepath.Join(t.TempDir(), "case.safetensors")
	if err := os.WriteFile(inputs, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := cuda.BenchCase{Op: engine.OpSoftmax, DType: engine.BF16, Rows: 512, Vocab: 128256, Temperature: 0.7}
	rep, err := s.Time(peerRequest{Name: "softmax", Shape: shape(c), Case: c, Inputs: inputs, Iters: 100, Warmup: 10})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Name != "softmax" || rep.Shape != "bf16 B=512 V=128256" || len(rep.Peers) != 3 {
		t.Fatalf("reply %+v", rep)
	}
	if p := rep.Peers[0]; p.Peer != "torch" || p.MedianUS != 300 || p.B2BUS != 310 {
		t.Errorf("torch peer %+v", p)
	}
	if p := rep.Peers[1]; p.Error == "" {
		t.Errorf("compile peer %+v, want its error", p)
	}
	rep, err = s.Time(peerRequest{Name: "softmax", Shape: shape(c), Case: c, Inputs: inputs + ".gone"})
	if err != nil || !strings.Contains(rep.Error, "FileNotFoundError") {
		t.Errorf("missing inputs: %+v, %v; want the script's error in the reply", rep, err)
	}
	// The session goes on after a case the script could not time.
	if rep, err = s.Time(peerRequest{Name: "again", Shape: shape(c), Case: c, Inputs: inputs}); err != nil || rep.Name != "again" {
		t.Errorf("after a failed case: %+v, %v", rep, err)
	}
}

// TestPeersOff checks the one sentence the bench prints when the peers
// cannot run, per cause.
func TestPeersOff(t *testing.T) {
	tests := []struct {
		name, python, script, mode string
		want                       string
	}{
		{"no python", filepath.Join(t.TempDir(), "python3"), fakePeers, "ready", "could not start"},
		{"no torch", "sh", fakePeers, "notorch", "import torch failed: No module named 'torch'"},
		{"no hello", "sh", fakePeers, "silent", "gave no hello: it exited: exit status 3"},
		{"not json", "sh", fakePeers, "garbage", "gave no hello: it exited: exit status 1"},
		{"bad json", "sh", fakePeers, "badjson", `hello "{ready: yes}" is not JSON`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			s, err := startPeers(tc.python, tc.script, []string{tc.mode}, &stderr)
			if err == nil {
				s.Close()
				t.Fatal("the peers started")
			}
			if !errors.Is(err, errPeersOff) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want errPeersOff saying %q", err, tc.want)
			}
			if tc.mode == "garbage" && !strings.Contains(stderr.String(), "Traceback") {
				t.Errorf("the script's other lines did not reach stderr: %q", stderr.String())
			}
		})
	}
	if _, err := findPeerScript(filepath.Join(t.TempDir(), "peers.py")); err == nil || !strings.Contains(err.Error(), "was not found") {
		t.Errorf("a missing script: %v", err)
	}
}

// TestPrintPeers renders the peers' table: our median, each peer's
// median and speedup (peer / ours), "-" and "failed" cells with their
// reasons below, and the fallback sentence when the peers did not run.
func TestPrintPeers(t *testing.T) {
	soft := cuda.BenchCase{Op: engine.OpSoftmax, DType: engine.BF16, Rows: 512, Vocab: 128256}
	arg := cuda.BenchCase{Op: engine.OpArgmax, DType: engine.BF16, Rows: 128, Vocab: 128256}
	ngram := cuda.BenchCase{Op: engine.OpNgramMatch, DType: engine.F32, Rows: 1, PromptLen: 4096, GenLen: 512}
	rows := []benchRow{
		{Name: "softmax", Result: &cuda.BenchResult{Case: soft, Median: 155 * time.Microsecond},
			Peers: withSpeedups([]peerTime{
				{Peer: "torch", MedianUS: 620},
				{Peer: "torch.compile", MedianUS: 367},
				{Peer: "triton", MedianUS: 248},
			}, 155*time.Microsecond)},
		{Name: "argmax", Result: &cuda.BenchResult{Case: arg, Median: 20 * time.Microsecond},
			Peers: withSpeedups([]peerTime{
				{Peer: "torch", MedianUS: 40},
				{Peer: "torch.compile", Error: "compile failed: X: y"},
				{Peer: "triton", Skipped: "import triton failed: no"},
			}, 20*time.Microsecond)},
		{Name: "ngram_match", Result: &cuda.BenchResult{Case: ngram, Median: 14 * time.Microsecond}},
	}
	hello := &peerHello{Ready: true, Torch: "2.9", Device: "H100", Compile: true, Triton: "3.5"}
	var out bytes.Buffer
	printPeers(&out, &benchReport{Rows: rows, Peers: hello})
	text := out.String()
	lines := strings.Split(text, "\n")
	find := func(prefix string) []string {
		for _, l := range lines {
			if strings.HasPrefix(strings.TrimSpace(l), prefix) {
				return strings.Fields(l)
			}
		}
		t.Fatalf("no line starting %q in\n%s", prefix, text)
		return nil
	}
	tests := []struct {
		row  string
		want []string // ours, then each peer's us and speedup
	}{
		{"softmax", []string{"155.0", "620.0", "4.00x", "367.0", "2.37x", "248.0", "1.60x"}},
		{"argmax", []string{"20.0", "40.0", "2.00x", "failed", "-", "-", "-"}},
	}
	for _, tc := range tests {
		f := find(tc.row)
		if got := f[len(f)-7:]; strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("%s: cells %v, want %v", tc.row, got, tc.want)
		}
	}
	for _, want := range []string{
		"peers: python/peers.py on H100, torch 2.9 with torch.compile, triton 3.5",
		"speedup = peer median / ours (above 1, ours is faster)",
		"torch.compile: compile failed: X: y: argmax bf16 B=128 V=128256",
		"triton: import triton failed: no: argmax bf16 B=128 V=128256",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in\n%s", want, text)
		}
	}
	if strings.Contains(text, "ngram_match") {
		t.Errorf("a case without peers has a row:\n%s", text)
	}

	out.Reset()
	printPeers(&out, &benchReport{Rows: rows[2:], PeersOff: "import torch failed: No module named 'torch'"})
	if got, want := strings.TrimSpace(out.String()), "peers: import torch failed: No module named 'torch'; timed ours alone"; got != want {
		t.Errorf("fallback %q, want %q", got, want)
	}
}

// TestPeerCase lists the cases whose inputs the bench writes for the peers.
func TestPeerCase(t *testing.T) {
	tests := []struct {
		name string
		c    cuda.BenchCase
		want bool
	}{
		{"argmax", cuda.BenchCase{Op: engine.OpArgmax}, true},
		{"sample", cuda.BenchCase{Op: engine.OpSample, TopK: 50, TopP: 0.9}, true},
		{"sample min-p", cuda.BenchCase{Op: engine.OpSample, MinP: 0.1}, false},
		{"sample counts", cuda.BenchCase{Op: engine.OpSample, Draws: 10_000_000}, false},
		{"spec_verify", cuda.BenchCase{Op: engine.OpSpecVerify, K: 8}, true},
		{"tree", cuda.BenchCase{Op: engine.OpSpecTreeVerify, Nodes: 64, TreeTopK: 4}, true},
		{"tree k50", cuda.BenchCase{Op: engine.OpSpecTreeVerify, Nodes: 64, TreeTopK: 4, TopK: 50}, false},
		{"ngram_match", cuda.BenchCase{Op: engine.OpNgramMatch}, false},
	}
	for _, tc := range tests {
		if got := peerCase(tc.c); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestMatchCase checks --match and its |-separated alternatives.
func TestMatchCase(t *testing.T) {
	tests := []struct {
		label, match string
		want         bool
	}{
		{"softmax bf16 B=512 V=128256", "", true},
		{"softmax bf16 B=512 V=128256", "B=512", true},
		{"softmax bf16 B=512 V=128256", "B=128", false},
		{"softmax bf16 B=512 V=128256", "argmax|softmax bf16 B=512", true},
		{"sample k50 p0.9 rejection bf16 B=512 V=128256", "sample k50 p0.9 bf16|spec_verify", false},
	}
	for _, tc := range tests {
		if got := matchCase(tc.label, tc.match); got != tc.want {
			t.Errorf("matchCase(%q, %q) = %v, want %v", tc.label, tc.match, got, tc.want)
		}
	}
}

// TestPeersScript runs the real python/peers.py on the CPU through the
// protocol, on inputs files in the layout of the bench's worker: every
// case the script has a torch peer for comes back timed. It needs a python
// with torch ($SAMPVIZ_PYTHON, else /usr/bin/python3) and skips without
// one, unless SAMPVIZ_REQUIRE_PYTHON=1.
func TestPeersScript(t *testing.T) {
	python := envOr("SAMPVIZ_PYTHON", "/usr/bin/python3")
	if err := exec.Command(python, "-c", "import torch").Run(); err != nil {
		if os.Getenv("SAMPVIZ_REQUIRE_PYTHON") == "1" {
			t.Fatalf("SAMPVIZ_REQUIRE_PYTHON=1 but %s cannot import torch: %v", python, err)
		}
		t.Skipf("%s cannot import torch: %v", python, err)
	}
	t.Setenv("SAMPVIZ_PEERS_DEVICE", "cpu")
	s, err := startPeers(python, filepath.Join("..", "..", "python", "peers.py"), []string{"--no-compile", "--no-triton"}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Hello.Device != "cpu" || s.Hello.Compile || s.Hello.TritonWhy != "--no-triton" {
		t.Errorf("hello %+v", s.Hello)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	bf16 := func(name string, shape ...int) *engine.Tensor {
		n := 1
		for _, d := range shape {
			n *= d
		}
		data := make([]byte, 2*n)
		for i := range n {
			binary.LittleEndian.PutUint16(data[2*i:], engine.F32ToBF16(float32(rng.NormFloat64()*2)))
		}
		return &engine.Tensor{Name: name, DType: engine.BF16, Shape: shape, Data: data}
	}
	drafts := &engine.Tensor{Name: "drafts", DType: engine.I32, Shape: []int{1, 2, 3}, Data: make([]byte, 4*6)}
	for i := range 6 {
		binary.LittleEndian.PutUint32(drafts.Data[4*i:], uint32(rng.IntN(32)))
	}
	tests := []struct {
		name    string
		c       cuda.BenchCase
		tensors []*engine.Tensor
		timed   string // the peer that must come back timed
	}{
		{"softmax", cuda.BenchCase{Op: engine.OpSoftmax, DType: engine.BF16, Rows: 2, Vocab: 32, Temperature: 0.7},
			[]*engine.Tensor{bf16("logits", 2, 2, 32)}, "torch"},
		{"sample k5 p0.9", cuda.BenchCase{Op: engine.OpSample, DType: engine.BF16, Rows: 2, Vocab: 32, Temperature: 0.7, TopK: 5, TopP: 0.9},
			[]*engine.Tensor{bf16("logits", 1, 2, 32)}, "torch"},
		{"spec_verify", cuda.BenchCase{Op: engine.OpSpecVerify, DType: engine.BF16, Rows: 2, Vocab: 32, K: 3, Temperature: 1},
			[]*engine.Tensor{bf16("target", 1, 2, 4, 32), drafts}, "torch"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "inputs.safetensors")
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := dump.WriteSafetensors(f, tc.tensors, map[string]string{"op": string(tc.c.Op), "sets": "1"}); err != nil {
				t.Fatal(err)
			}
			f.Close()
			rep, err := s.Time(peerRequest{Name: tc.name, Shape: shape(tc.c), Case: tc.c, Inputs: path, Iters: 3, Warmup: 1})
			if err != nil {
				t.Fatal(err)
			}
			p := findPeer(rep.Peers, tc.timed)
			if p == nil || !(p.MedianUS > 0) {
				t.Errorf("%s not timed: %+v", tc.timed, rep.Peers)
			}
			if p := findPeer(rep.Peers, "triton"); p == nil || p.Skipped == "" {
				t.Errorf("triton: %+v, want skipped", p)
			}
		})
	}
}
