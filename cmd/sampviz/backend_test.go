package main

import (
	"io"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpenBackend(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "libsampviz_kernels.so")
	tests := []struct {
		name, backend, kernels string
		wantName, reason       string
		wantErr                string
	}{
		{"cpu", "cpu", "", "cpu", "--backend cpu", ""},
		{"auto without the library", "auto", missing, "cpu", "--backend auto: cpu, because libsampviz_kernels.so was not found at " + missing, ""},
		{"cuda without the library", "cuda", missing, "", "", "--backend cuda: libsampviz_kernels.so was not found at " + missing},
		{"unknown", "tpu", "", "", "", `unknown backend "tpu"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := openBackend(tt.backend, tt.kernels, 0)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer b.(io.Closer).Close()
			if b.Name() != tt.wantName {
				t.Errorf("backend %q, want %q", b.Name(), tt.wantName)
			}
			if got := b.Device().Reason; got != tt.reason {
				t.Errorf("reason %q, want %q", got, tt.reason)
			}
		})
	}
}

func TestFindKernelsSearchOrder(t *testing.T) {
	t.Setenv("SAMPVIZ_KERNELS", filepath.Join(t.TempDir(), "nowhere.so"))
	t.Chdir(t.TempDir())
	_, err := findKernels("")
	if err == nil {
		t.Fatal("found a library in an empty folder")
	}
	for _, want := range []string{"nowhere.so", filepath.Join("build", kernelLibrary), "make kernels"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}
