package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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

// TestPeerClose checks that Close returns within its bound and after the
// script's Wait, whether the script exits on its own, never reads its
// input, or leaves a child holding its stdout and stderr (python's compile
// workers): a child in the script's process group dies with it; one that
// left the group lives on, and Close still returns (WaitDelay).
func TestPeerClose(t *testing.T) {
	const exitWait = 200 * time.Millisecond
	tests := []struct {
		name      string
		mode      string
		childDies bool  // the child, where the mode starts one, is gone after Close
		killed    bool  // Close had to kill the script or its child
		wantWait  error // what the script's Wait returns, as errors.Is or errors.As sees it
	}{
		{"exits on its own", "ready", false, false, nil},
		{"never reads its input", "deaf", false, true, &exec.ExitError{}},
		{"a child holds its pipes", "heir", true, true, nil},
		{"an escaped child holds its pipes", "escaped", false, true, exec.ErrWaitDelay},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "child")
			s, err := startPeers("sh", fakePeers, []string{tc.mode, pidFile}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			child := 0
			if tc.mode == "heir" || tc.mode == "escaped" {
				if child = readPid(t, pidFile); child > 0 {
					t.Cleanup(func() { syscall.Kill(child, syscall.SIGKILL) })
				}
			}
			s.exitWait = exitWait
			start := time.Now()
			s.Close()
			took := time.Since(start)
			t.Logf("Close took %s", took)
			if bound := exitWait + 3*peerPipeWait + time.Second; took > bound {
				t.Errorf("Close took %s, more than %s", took, bound)
			}
			if !tc.killed && took >= exitWait {
				t.Errorf("Close took %s: it waited for a script that had exited", took)
			}
			select {
			case err := <-s.done:
				var ee *exec.ExitError
				switch want := tc.wantWait.(type) {
				case nil:
					if err != nil {
						t.Errorf("Wait: %v, want nil", err)
					}
				case *exec.ExitError:
					if !errors.As(err, &ee) {
						t.Errorf("Wait: %v, want the kill's exit status", err)
					}
				default:
					if !errors.Is(err, want) {
						t.Errorf("Wait: %v, want %v", err, want)
					}
				}
			default:
				t.Fatal("Close returned before the script's Wait")
			}
			if child > 0 {
				if gone := processGone(child, 2*time.Second); gone != tc.childDies {
					t.Errorf("child %d gone after Close: %v, want %v", child, gone, tc.childDies)
				}
			}
		})
	}
}

// readPid reads the pid the fake script wrote to path, waiting for it a
// little.
func readPid(t *testing.T, path string) int {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
			return pid
		}
	}
	t.Fatalf("no pid in %s", path)
	return 0
}

// processGone reports whether pid has ended (or is a zombie nobody
// reaped) within wait.
func processGone(pid int, wait time.Duration) bool {
	for deadline := time.Now().Add(wait); ; time.Sleep(20 * time.Millisecond) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		// The state follows the command's closing parenthesis.
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// signalHelperEnv makes TestPeersSignalHelper, in a process of its own, open
// the fake peers as `sampviz bench --peers` does and wait for a signal.
const signalHelperEnv = "SAMPVIZ_TEST_PEERS_SIGNAL"

// TestPeersSignal checks that SIGINT or SIGTERM during `sampviz bench
// --peers` removes the inputs folder and kills the peer script, and that
// the signal then ends the process as it would have.
func TestPeersSignal(t *testing.T) {
	tests := []struct {
		name string
		sig  syscall.Signal
	}{
		{"ctrl-c", syscall.SIGINT},
		{"sigterm", syscall.SIGTERM},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestPeersSignalHelper$")
			cmd.Env = append(os.Environ(), signalHelperEnv+"=1", "SAMPVIZ_PEERS_FLAGS=ready")
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			// The helper prints the inputs folder and the script's pid once
			// its signal handler is in place.
			var dir string
			var pid int
			if _, err := fmt.Fscan(out, &dir, &pid); err != nil {
				t.Fatalf("helper: %v\n%s", err, stderr.String())
			}
			if _, err := os.Stat(filepath.Join(dir, "case00.safetensors")); err != nil {
				t.Fatalf("the helper's inputs: %v", err)
			}
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			waited := make(chan error, 1)
			go func() { waited <- cmd.Wait() }()
			select {
			case <-waited:
			case <-time.After(10 * time.Second):
				t.Fatalf("the helper did not end within 10 s of %v\n%s", tc.sig, stderr.String())
			}
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != tc.sig {
				t.Errorf("the helper ended with %v, want the signal %v\n%s", cmd.ProcessState, tc.sig, stderr.String())
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				os.RemoveAll(dir)
				t.Errorf("the inputs folder %s is still there after %v (stat: %v)", dir, tc.sig, err)
			}
			if !processGone(pid, 2*time.Second) {
				syscall.Kill(pid, syscall.SIGKILL)
				t.Errorf("the peer script %d lives on after %v", pid, tc.sig)
			}
		})
	}
}

// TestPeersSignalHelper is TestPeersSignal's bench, run only in a process
// of its own: it opens the fake peers with their inputs folder as
// runBench does, writes a case's inputs there and waits to be signalled.
func TestPeersSignalHelper(t *testing.T) {
	if os.Getenv(signalHelperEnv) != "1" {
		t.Skip("run by TestPeersSignal in a process of its own")
	}
	peers, dir, err := openPeers("sh", fakePeers)
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	defer peers.Close()
	defer closePeersOnSignal(peers, dir)()
	if err := os.WriteFile(filepath.Join(dir, "case00.safetensors"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("%s %d\n", dir, peers.cmd.Process.Pid)
	time.Sleep(30 * time.Second)
	t.Fatal("no signal came")
}
