package web

import "testing"

func TestUploadNames(t *testing.T) {
	tests := []struct {
		name, in string
		head     string
		wantName string
		wantExt  string
	}{
		{"safetensors by name", "dump.safetensors", "\x10\x00\x00\x00", "dump.safetensors", ".safetensors"},
		{"npz by name, any case", "Dump.NPZ", "PK\x03\x04", "Dump.NPZ", ".npz"},
		{"npy by content", "logits", "\x93NUMPY\x01\x00", "logits", ".npy"},
		{"zip by content", "upload", "PK\x03\x04", "upload", ".npz"},
		{"pt by name", "capture.pt", "PK\x03\x04", "capture.pt", ".pt"},
		{"anything else is tried as safetensors", "notes.txt", "hello", "notes.txt", ".safetensors"},
		{"a path keeps its base", "../../etc/passwd", "x", "passwd", ".safetensors"},
		{"windows path", `C:\Users\me\dump.npy`, "\x93NUMPY", "dump.npy", ".npy"},
		{"control characters", "du\x00mp\n.npy", "\x93NUMPY", "dump.npy", ".npy"},
		{"empty", "", "x", "upload", ".safetensors"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := cleanName(tt.in)
			if n != tt.wantName {
				t.Errorf("cleanName(%q) = %q, want %q", tt.in, n, tt.wantName)
			}
			if ext := dumpExt(n, []byte(tt.head)); ext != tt.wantExt {
				t.Errorf("dumpExt(%q) = %q, want %q", n, ext, tt.wantExt)
			}
		})
	}
}
