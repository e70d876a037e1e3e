package dump

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sampviz/sampviz/engine"
)

// newRand returns a generator with a fresh seed, logged so a failure can be
// replayed.
func newRand(t testing.TB) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	t.Logf("random seed %d", seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// randomTensor fills a tensor of dtype and shape with random non-zero values.
func randomTensor(rng *rand.Rand, name string, dtype engine.DType, shape ...int) *engine.Tensor {
	t := engine.NewTensor(name, dtype, shape...)
	for i := range t.NumElements() {
		switch dtype {
		case engine.Bool:
			t.SetInt(i, int64(rng.IntN(2)))
		case engine.U8:
			t.SetInt(i, int64(1+rng.IntN(255)))
		case engine.I32, engine.I64:
			t.SetInt(i, int64(rng.Int32())-math.MaxInt32/2)
		default:
			v := rng.NormFloat64() * 4
			if v == 0 {
				v = 0.5
			}
			t.SetFloat(i, v)
		}
	}
	return t
}

// safetensorsBytes writes tensors and meta with WriteSafetensors.
func safetensorsBytes(t testing.TB, meta map[string]string, tensors ...*engine.Tensor) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := WriteSafetensors(&b, tensors, meta); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// npzBytes writes tensors and meta with WriteNPZ.
func npzBytes(t testing.TB, meta map[string]string, tensors ...*engine.Tensor) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := WriteNPZ(&b, tensors, meta); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// npyBytes writes one tensor with WriteNPY.
func npyBytes(t testing.TB, tensor *engine.Tensor) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := WriteNPY(&b, tensor); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// rawSafetensors lays out a header written by hand and a data buffer.
func rawSafetensors(header string, data []byte) []byte {
	out := make([]byte, 8, 8+len(header)+len(data))
	binary.LittleEndian.PutUint64(out, uint64(len(header)))
	out = append(out, header...)
	return append(out, data...)
}

// rawNPY lays out a version 1.0 npy header written by hand and its data.
func rawNPY(dict string, data []byte) []byte {
	out := append([]byte(nil), npyMagic...)
	out = append(out, 1, 0, 0, 0)
	binary.LittleEndian.PutUint16(out[8:], uint16(len(dict)+1))
	out = append(out, dict...)
	out = append(out, '\n')
	return append(out, data...)
}

// member is one zip member for zipOf. A zero method stores the content; a
// set declared size or crc forges the directory.
type member struct {
	name     string
	content  []byte
	method   uint16
	declared uint64 // uncompressed size to declare (0: the real one)
	badCRC   bool
	// compressed replaces the deflated stream (for truncated streams).
	compressed []byte
}

// zipOf builds an archive member by member, forging what member says.
func zipOf(t testing.TB, members ...member) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, m := range members {
		body := m.content
		if m.method == zip.Deflate {
			body = m.compressed
			if body == nil {
				var c bytes.Buffer
				fw, _ := flate.NewWriter(&c, flate.BestCompression)
				fw.Write(m.content)
				fw.Close()
				body = c.Bytes()
			}
		}
		crc := crc32.ChecksumIEEE(m.content)
		if m.badCRC {
			crc ^= 1
		}
		size := uint64(len(m.content))
		if m.declared != 0 {
			size = m.declared
		}
		w, err := zw.CreateRaw(&zip.FileHeader{
			Name: m.name, Method: m.method, CRC32: crc,
			CompressedSize64: uint64(len(body)), UncompressedSize64: size,
		})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(body)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// f32Bytes encodes float32 values little-endian.
func f32Bytes(v ...float32) []byte {
	out := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
	}
	return out
}

// checkError asserts err is an *Error about file and tensor whose message
// holds every word.
func checkError(t *testing.T, err error, file, tensor string, words ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one with %q", words)
	}
	var de *Error
	if !errors.As(err, &de) {
		t.Fatalf("error %q (%T) is not a *dump.Error", err, err)
	}
	if de.File != file {
		t.Errorf("File = %q, want %q (error %q)", de.File, file, err)
	}
	if de.Tensor != tensor {
		t.Errorf("Tensor = %q, want %q (error %q)", de.Tensor, tensor, err)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, file+": ") {
		t.Errorf("error %q does not start with the file name", msg)
	}
	if tensor != "" && !strings.Contains(msg, `tensor "`+tensor+`"`) {
		t.Errorf("error %q does not name tensor %q", msg, tensor)
	}
	for _, w := range words {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q lacks %q", msg, w)
		}
	}
}

// parseAndLoad parses data and loads every tensor, as a run that uses them
// all would: the errors of deflated members come from Load.
func parseAndLoad(name string, data []byte) (*File, error) {
	f, err := Parse(name, data)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(f.Tensors))
	for i, t := range f.Tensors {
		names[i] = t.Name
	}
	if err := f.Load(names...); err != nil {
		return nil, err
	}
	return f, nil
}
