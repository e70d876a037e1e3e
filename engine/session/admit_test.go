package session

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
	"errors"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/dump"
)

// TestAdmitAnswersAsExecute: a dump that breaks a rule only its reading
// shows (a deflated member that fails its CRC or inflates past its
// declared size, a pickle that needs more memory than the budget, a
// compressed or empty file stored under a dump's extension) is refused by
// Admit, before a server accepts it, in the sentence Execute gives
// `sampviz check`, with the same status.
func TestAdmitAnswersAsExecute(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	logits := make([]float32, 4*16)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64())
	}
	var npz bytes.Buffer
	if err := dump.WriteNPZ(&npz, []*engine.Tensor{engine.FromFloat32s("logits", engine.F32, []int{4, 16}, logits)}, map[string]string{"op": "softmax"}); err != nil {
		t.Fatal(err)
	}
	var st bytes.Buffer
	if err := dump.WriteSafetensors(&st, []*engine.Tensor{engine.FromFloat32s("logits", engine.F32, []int{4, 16}, logits)}, map[string]string{"op": "softmax"}); err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(st.Bytes())
	zw.Close()
	dictFlood := ptArchive(t, append(append([]byte{0x80, 2}, bytes.Repeat([]byte{'}'}, 1_200_000)...), '.'))

	tests := []struct {
		name       string
		upload     string // what the uploader called it
		stored     string // the server's file
		data       []byte
		overBudget bool
		want       string
	}{
		{"a deflated member that fails its CRC", "crc.npz", "upload-1.npz", deflated(t, npz.Bytes(), func(h *zip.FileHeader, body []byte) []byte { h.CRC32 ^= 1; return body }), false,
			`crc.npz: tensor "logits": zip member fails its CRC-32 check`},
		{"a deflated member that inflates past its size", "past.npz", "upload-1.npz", deflated(t, npz.Bytes(), func(h *zip.FileHeader, body []byte) []byte {
			h.CRC32 = crc32.ChecksumIEEE(append(body, make([]byte, 1<<20)...))
			return append(body, make([]byte, 1<<20)...)
		}), false, `past.npz: tensor "logits": zip member inflates past its declared`},
		{"a pickle past the budget", "flood.pt", "upload-1.pt", dictFlood, true,
			"flood.pt needs about 342.1 MiB of memory to read (unpickling archive/data.pkl 294.1 MiB, the process 48 MiB), more than the 256 MiB allowed (--max-memory)"},
		{"a gzipped dump", "dump.safetensors.gz", "upload-1.safetensors", gz.Bytes(), false,
			"dump.safetensors.gz: not a dump but a gzip-compressed file: decompress it (gunzip) and give sampviz the dump inside"},
		{"an empty file", "empty.safetensors", "upload-1.safetensors", nil, false,
			"empty.safetensors: the file is empty (0 bytes), not a dump (safetensors, .npz, .npy or .pt)"},
		{"notes", "notes.txt", "upload-1.safetensors", []byte("these are not logits, not even close"), false,
			"notes.txt: not a dump: the content is neither safetensors, .npz, .npy nor .pt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tt.stored)
			if err := os.WriteFile(path, tt.data, 0o644); err != nil {
				t.Fatal(err)
			}
			s := New(cpu.New())
			s.MaxMemory = 256 << 20
			job := Job{DumpPath: path, FileName: tt.upload, Backend: "cpu"}
			var admitted, executed *InputError
			if _, err := s.Admit(context.Background(), job); !errors.As(err, &admitted) {
				t.Fatalf("Admit: %v, want an *InputError", err)
			}
			if _, err := s.Execute(context.Background(), job, nil); !errors.As(err, &executed) {
				t.Fatalf("Execute: %v, want an *InputError", err)
			}
			if admitted.Error() != executed.Error() || admitted.OverBudget != executed.OverBudget {
				t.Errorf("Admit says %q (over budget %v), Execute %q (%v)", admitted, admitted.OverBudget, executed, executed.OverBudget)
			}
			if !strings.HasPrefix(admitted.Error(), tt.want) || admitted.OverBudget != tt.overBudget {
				t.Errorf("Admit says %q (over budget %v), want %q (%v)", admitted, admitted.OverBudget, tt.want, tt.overBudget)
			}
		})
	}
}

// deflated rewrites the stored members of an npz as deflated ones, after
// forge changes each one's header and body.
func deflated(t *testing.T, npz []byte, forge func(h *zip.FileHeader, body []byte) []byte) []byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(npz), int64(len(npz)))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	for _, f := range zr.File {
		rc, _ := f.Open()
		body, _ := io.ReadAll(rc)
		rc.Close()
		h := &zip.FileHeader{Name: f.Name, Method: zip.Deflate, CRC32: crc32.ChecksumIEEE(body), UncompressedSize64: uint64(len(body))}
		if f.Name == "logits.npy" {
			body = forge(h, body)
		}
		var c bytes.Buffer
		fw, _ := flate.NewWriter(&c, flate.BestCompression)
		fw.Write(body)
		fw.Close()
		h.CompressedSize64 = uint64(c.Len())
		w, err := zw.CreateRaw(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(c.Bytes())
	}
	zw.Close()
	return out.Bytes()
}

// ptArchive is a torch.save archive of one pickle.
func ptArchive(t *testing.T, pkl []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, err := zw.CreateHeader(&zip.FileHeader{Name: "archive/data.pkl", Method: zip.Store})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(pkl)
	zw.Close()
	return b.Bytes()
}
