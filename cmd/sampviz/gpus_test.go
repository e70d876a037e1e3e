package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
)

func TestGPUListFlag(t *testing.T) {
	tests := []struct {
		in      string
		want    []int
		wantErr string
	}{
		{"0", []int{0}, ""},
		{"0,2", []int{0, 2}, ""},
		{" 3 , 1 ", []int{3, 1}, ""},
		{"0,x", nil, `"x" is not a GPU number`},
		{"-1", nil, `"-1" is not a GPU number`},
		{"", nil, `"" is not a GPU number`},
		{"1,,2", nil, `"" is not a GPU number`},
		{"1,2,1", nil, "GPU 1 is named twice"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var g gpuList
			err := g.Set(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("Set(%q) = %v, %v; want an error saying %q", tt.in, g, err, tt.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(g, tt.want) {
				t.Errorf("Set(%q) = %v, %v; want %v", tt.in, g, err, tt.want)
			}
		})
	}
}

func TestGPUNumberFlag(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int
		ok   bool
	}{{"0", 0, true}, {"3", 3, true}, {"-1", 0, false}, {"one", 0, false}, {"0,1", 0, false}} {
		var g gpuNumber
		if err := g.Set(tt.in); (err == nil) != tt.ok || tt.ok && int(g) != tt.want {
			t.Errorf("Set(%q) = %d, %v; want %d, ok %v", tt.in, g, err, tt.want, tt.ok)
		}
	}
}

// TestServeRefusesBadGPUs gives serve GPUs it cannot use: each refusal exits
// 2 with one sentence and prints nothing on stdout. The GPUs are the fake
// device's (two of them), served by this test binary as `sampviz worker`.
func TestServeRefusesBadGPUs(t *testing.T) {
	t.Setenv(mainEnv, "1")
	t.Setenv("SAMPVIZ_WORKER_FAKE", "1")
	t.Setenv("SAMPVIZ_WORKER_FAKE_GPUS", "2")
	lib := filepath.Join(t.TempDir(), kernelLibrary)
	if err := os.WriteFile(lib, []byte("the fake device loads no library"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"not a number", []string{"--gpus", "0,x"}, `invalid value "0,x" for flag -gpus: "x" is not a GPU number`},
		{"named twice", []string{"--gpus", "1,1"}, "GPU 1 is named twice"},
		{"cpu backend", []string{"--backend", "cpu", "--gpus", "0"}, "--gpus picks the GPUs of the cuda backend; --backend cpu runs on none"},
		{"past the last", []string{"--backend", "cuda", "--kernels", lib, "--gpus", "0,5"}, "--backend cuda: GPU 5: no such GPU: CUDA sees 2 GPUs (0 to 1) on this host"},
		{"only past the last", []string{"--backend", "cuda", "--kernels", lib, "--gpus", "2"}, "GPU 2: no such GPU: CUDA sees 2 GPUs (0 to 1)"},
		{"auto does not fall back", []string{"--kernels", lib, "--gpus", "7"}, "--gpus: GPU 7: no such GPU"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"--data", t.TempDir()}, tt.args...)
			if code := runServe(args, &stdout, &stderr); code != exitUnusable {
				t.Errorf("exit %d, want %d; stderr %q", code, exitUnusable, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("stderr %q, want %q", stderr.String(), tt.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("printed %q before refusing", stdout.String())
			}
		})
	}
}

func TestCheckRefusesBadGPU(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"not a number", []string{"--gpu", "-1", "--example"}, `invalid value "-1" for flag -gpu: "-1" is not a GPU number`},
		{"cpu backend", []string{"--gpu", "1", "--backend", "cpu", "--example"}, "--gpu picks the GPU of the cuda backend; --backend cpu runs on none"},
		{"cpu backend, GPU 0 named", []string{"--backend", "cpu", "--gpu", "0", "--example"}, "--gpu picks the GPU of the cuda backend; --backend cpu runs on none"},
		{"no backend", []string{"--backend", "none", "--gpu", "0", "--example"}, "--gpu picks the GPU of the cuda backend; --backend none runs on none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := runCheck(tt.args, &stdout, &stderr); code != exitUnusable {
				t.Errorf("exit %d, want %d; stderr %q", code, exitUnusable, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.want) || strings.Count(strings.TrimSpace(stderr.String()), "\n") != 0 {
				t.Errorf("stderr %q, want one line saying %q", stderr.String(), tt.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("printed %q before refusing", stdout.String())
			}
		})
	}
	// Without --gpu, the cpu backend judges the example as before (the
	// example has failing rows on purpose: exit 1, not 2).
	var stdout, stderr bytes.Buffer
	if code := runCheck([]string{"--backend", "cpu", "--example"}, &stdout, &stderr); code == exitUnusable || stdout.Len() == 0 {
		t.Errorf("check --backend cpu --example: exit %d, stdout %d bytes; want a report; stderr %q", code, stdout.Len(), stderr.String())
	}
}

// TestServeBackendDownGPU starts serve's backend on two fake GPUs, some of
// whose workers cannot start: it serves on the GPUs that start, showing the
// others down with their sentence, and only when none starts does auto fall
// back to the cpu (saying why) and cuda refuse.
func TestServeBackendDownGPU(t *testing.T) {
	t.Setenv(mainEnv, "1")
	t.Setenv("SAMPVIZ_WORKER_FAKE", "1")
	t.Setenv("SAMPVIZ_WORKER_FAKE_GPUS", "2")
	lib := filepath.Join(t.TempDir(), kernelLibrary)
	if err := os.WriteFile(lib, []byte("the fake device loads no library"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, backend, down string
		want                string // the backend's name
		wantDown            []int
		reason, err         string
	}{
		{"auto, one down", "auto", "1", "cuda", []int{1}, "--backend auto: cuda (fake GPU", ""},
		{"auto, the first down", "auto", "0", "cuda", []int{0}, "--backend auto: cuda (fake GPU", ""},
		{"auto, none down", "auto", "", "cuda", nil, "--backend auto: cuda (fake GPU", ""},
		{"auto, every one down", "auto", "0,1", "cpu", nil, "--backend auto: cpu, because no GPU answered through " + lib + ": GPU 0: backend unavailable", ""},
		{"cuda, one down", "cuda", "0", "cuda", []int{0}, "--backend cuda", ""},
		{"cuda, every one down", "cuda", "0,1", "", nil, "", "--backend cuda: no GPU answered through " + lib + ": GPU 0: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("SAMPVIZ_WORKER_FAKE_DOWN", tt.down)
			b, err := serveBackend(tt.backend, lib, nil)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("serveBackend: %v, want an error saying %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer b.(io.Closer).Close()
			d := b.Device()
			if b.Name() != tt.want || !strings.Contains(d.Reason, tt.reason) || strings.Contains(d.Reason, "\n") {
				t.Fatalf("backend %s, reason %q; want %s, one line saying %q", b.Name(), d.Reason, tt.want, tt.reason)
			}
			var down []int
			if r, ok := b.(interface{ GPUs() []engine.GPUState }); ok {
				for _, g := range r.GPUs() {
					if g.State == engine.GPUDown {
						down = append(down, g.Index)
						if want := "fake GPU " + strconv.Itoa(g.Index) + " does not start"; !strings.Contains(g.Fault, want) {
							t.Errorf("GPU %d down: %q, want its sentence %q", g.Index, g.Fault, want)
						}
					}
				}
			}
			if !slices.Equal(down, tt.wantDown) {
				t.Errorf("GPUs down %v, want %v", down, tt.wantDown)
			}
		})
	}
}
