package web

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	"github.com/sampviz/sampviz/web/store"
)

// Dump file extensions, as DUMPS.md names the containers.
var dumpExts = []string{".safetensors", ".npz", ".npy", ".pt"}

// upload is a body received into a temporary file in the data directory.
type upload struct {
	name string // what the uploader called it
	ext  string
	path string // the temporary file
	sha  string
	size int64
	// known says whether the name or the first bytes look like a dump.
	known bool
}

// acceptUpload reads an upload (a multipart form with a file, or a raw
// body), checks it with the runner and creates its run, queued. Nothing is
// stored unless the dump is valid and the queue has room.
func (s *Server) acceptUpload(w http.ResponseWriter, r *http.Request) (store.Run, *DumpInfo, error) {
	if !s.queue.reserve() {
		return store.Run{}, nil, errQueueFull(s.queue.length())
	}
	reserved := true
	defer func() {
		if reserved {
			s.queue.release()
		}
	}()
	// The query may set the run's parameters and backend, as a rerun's form
	// does (?trials=1000): checked before anything is read.
	p, backend, err := s.parseRerun(r.URL.Query())
	if err != nil {
		return store.Run{}, nil, badRequest(sentence(err.Error()))
	}
	if backend == "" {
		backend = s.defaultBackend()
	}
	// Past the limit the reader fails and the connection is closed after the
	// answer, so a huge upload is cut off rather than read to its end.
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxUpload)
	up, err := s.receive(r)
	if err != nil {
		return store.Run{}, nil, err
	}
	defer os.Remove(up.path) // a no-op once adopted
	info, err := s.runner.Inspect(r.Context(), up.path, up.name)
	if err != nil {
		var bad *BadDumpError
		if errors.As(err, &bad) {
			msg := bad.Error()
			if !up.known {
				// Neither the name nor the content says dump: say that first,
				// then what the parser found.
				msg = fmt.Sprintf("%s is not a dump sampviz can read (safetensors, .npz, .npy or .pt): %s",
					up.name, strings.TrimPrefix(msg, up.name+": "))
			}
			return store.Run{}, nil, &httpError{Status: http.StatusBadRequest, Msg: sentence(msg), Err: err}
		}
		return store.Run{}, nil, internal(fmt.Errorf("inspect %s: %w", up.name, err))
	}
	dumpPath, err := s.store.AdoptDump(up.path, up.sha, up.ext)
	if err != nil {
		return store.Run{}, nil, internal(err)
	}
	run, err := s.createRun(store.Run{
		FileName: up.name, DumpSHA: up.sha, DumpExt: up.ext, DumpSize: up.size,
		Backend: backend,
	}, info, p, dumpPath)
	if err != nil {
		return store.Run{}, nil, err
	}
	reserved = false
	return run, info, nil
}

// createRun records run and queues its task in a place the caller reserved.
func (s *Server) createRun(run store.Run, info *DumpInfo, p Params, dumpPath string) (store.Run, error) {
	var err error
	run.ID = store.NewID()
	run.Created = time.Now()
	if run.Info, err = json.Marshal(info); err != nil {
		return store.Run{}, internal(err)
	}
	if run.Params, err = json.Marshal(p); err != nil {
		return store.Run{}, internal(err)
	}
	if err := s.store.CreateRun(run); err != nil {
		return store.Run{}, internal(err)
	}
	job := Job{
		RunID: run.ID, DumpPath: dumpPath, FileName: run.FileName,
		OutputsPath: s.store.OutputsPath(run.ID), Backend: run.Backend, Params: p,
	}
	t := &task{job: job, topic: newTopic(run.ID, "", info.Rows, info.Vocab, Status{State: store.Queued})}
	s.enqueue(t)
	s.log.Info("run queued", "run", run.ID, "file", run.FileName, "op", info.Op, "backend", run.Backend)
	return run, nil
}

// receive streams the upload into a temporary file, hashing it on the way.
func (s *Server) receive(r *http.Request) (*upload, error) {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct == "multipart/form-data" {
		mr, err := r.MultipartReader()
		if err != nil {
			return nil, badRequest("The upload is not a readable form; send the dump as the form's file, or as the raw request body.")
		}
		for {
			part, err := mr.NextPart()
			if err != nil {
				if tooLarge(err) {
					return nil, s.errTooLarge("the upload")
				}
				return nil, badRequest("The form carried no file: choose a dump (.safetensors, .npz, .npy or .pt) and send it again.")
			}
			if part.FileName() == "" {
				part.Close()
				continue
			}
			up, err := s.receiveBody(part, cleanName(part.FileName()))
			part.Close()
			return up, err
		}
	}
	name := r.PathValue("name")
	if name == "" {
		name = r.URL.Query().Get("name")
	}
	if name == "" {
		if _, params, err := mime.ParseMediaType(r.Header.Get("Content-Disposition")); err == nil {
			name = params["filename"]
		}
	}
	return s.receiveBody(r.Body, cleanName(name))
}

// receiveBody copies body into a temporary file named after its container.
func (s *Server) receiveBody(body io.Reader, name string) (*upload, error) {
	br := bufio.NewReaderSize(body, 64<<10)
	head, err := br.Peek(9)
	if err != nil && !errors.Is(err, io.EOF) {
		if tooLarge(err) {
			return nil, s.errTooLarge(name)
		}
		return nil, &httpError{Status: http.StatusBadRequest, Msg: fmt.Sprintf("The upload of %s was cut off before its end; send it again.", name), Err: err}
	}
	if len(head) == 0 {
		return nil, badRequest(fmt.Sprintf("%s is empty: choose a dump file (.safetensors, .npz, .npy or .pt).", name))
	}
	ext := dumpExt(name, head)
	if name == "" || name == "upload" {
		name = "upload" + ext
	}
	f, err := s.store.TempFile("upload-*" + ext)
	if err != nil {
		return nil, internal(err)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), br)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		if tooLarge(err) {
			return nil, s.errTooLarge(name)
		}
		return nil, &httpError{Status: http.StatusBadRequest, Msg: fmt.Sprintf("The upload of %s was cut off before its end; send it again.", name), Err: err}
	}
	return &upload{name: name, ext: ext, path: f.Name(), sha: hex.EncodeToString(h.Sum(nil)), size: n, known: looksLikeDump(name, head)}, nil
}

// looksLikeDump reports whether a file's name or first bytes say it is a
// dump: a dump extension, numpy's or zip's magic, or a safetensors header
// (an 8-byte length, then '{').
func looksLikeDump(name string, head []byte) bool {
	lower := strings.ToLower(name)
	for _, e := range dumpExts {
		if strings.HasSuffix(lower, e) {
			return true
		}
	}
	return bytes.HasPrefix(head, []byte("\x93NUMPY")) || bytes.HasPrefix(head, []byte("PK\x03\x04")) ||
		bytes.HasPrefix(head, []byte("PK\x05\x06")) || len(head) >= 9 && head[8] == '{'
}

// dumpExt picks the container extension: the name's when it has a known
// one, else the one its first bytes say (numpy's magic, a zip's, or
// safetensors, whose parser then says whether it is one).
func dumpExt(name string, head []byte) string {
	lower := strings.ToLower(name)
	for _, e := range dumpExts {
		if strings.HasSuffix(lower, e) {
			return e
		}
	}
	switch {
	case bytes.HasPrefix(head, []byte("\x93NUMPY")):
		return ".npy"
	case bytes.HasPrefix(head, []byte("PK\x03\x04")), bytes.HasPrefix(head, []byte("PK\x05\x06")):
		return ".npz"
	}
	return ".safetensors"
}

// cleanName keeps the base name of what a client called its file, without
// control characters, and at most 120 characters long.
func cleanName(name string) string {
	name = filepath.Base(strings.ReplaceAll(name, "\\", "/"))
	name = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, name)
	if name == "." || name == "/" || name == "" {
		return "upload"
	}
	if r := []rune(name); len(r) > 120 {
		name = string(r[:120])
	}
	return name
}

func tooLarge(err error) bool {
	var mbe *http.MaxBytesError
	return errors.As(err, &mbe)
}

func (s *Server) errTooLarge(name string) *httpError {
	return &httpError{
		Status: http.StatusRequestEntityTooLarge,
		Msg:    fmt.Sprintf("%s is larger than this server's upload limit of %s (sampviz serve --max-upload).", name, formatBytes(s.cfg.MaxUpload)),
	}
}

// sentence makes sure a message ends like a sentence.
func sentence(msg string) string {
	msg = strings.TrimSpace(msg)
	if msg == "" {
		return "The dump cannot be used."
	}
	// Capitalise a leading word, but never a file name ("dump.npz: ...").
	first, _, _ := strings.Cut(msg, " ")
	if r := []rune(msg); unicode.IsLower(r[0]) && !strings.ContainsAny(first, ".:/") {
		r[0] = unicode.ToUpper(r[0])
		msg = string(r)
	}
	if !strings.HasSuffix(msg, ".") {
		msg += "."
	}
	return msg
}

// formatBytes writes n in binary units: "4 GiB", "1.5 MiB".
func formatBytes(n int64) string {
	units := []string{"bytes", "KiB", "MiB", "GiB", "TiB"}
	v := float64(n)
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d %s", int64(v), units[i])
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}

// defaultBackend names the backend new runs use.
func (s *Server) defaultBackend() string {
	if bs := s.runner.Backends(); len(bs) > 0 {
		return bs[0].Backend
	}
	return "cpu"
}

// openScenario creates a run from a built-in scenario.
func (s *Server) openScenario(ctx context.Context, sc Scenario) (store.Run, error) {
	if !s.queue.reserve() {
		return store.Run{}, errQueueFull(s.queue.length())
	}
	reserved := true
	defer func() {
		if reserved {
			s.queue.release()
		}
	}()
	f, err := sc.Open()
	if err != nil {
		return store.Run{}, internal(fmt.Errorf("open scenario %s: %w", sc.Name, err))
	}
	defer f.Close()
	up, err := s.receiveBody(f, cleanName(sc.FileName))
	if err != nil {
		return store.Run{}, err
	}
	defer os.Remove(up.path)
	info, err := s.runner.Inspect(ctx, up.path, up.name)
	if err != nil {
		return store.Run{}, internal(fmt.Errorf("inspect scenario %s: %w", sc.Name, err))
	}
	dumpPath, err := s.store.AdoptDump(up.path, up.sha, up.ext)
	if err != nil {
		return store.Run{}, internal(err)
	}
	run, err := s.createRun(store.Run{FileName: up.name, DumpSHA: up.sha, DumpExt: up.ext, DumpSize: up.size, Backend: s.defaultBackend()}, info, sc.Params, dumpPath)
	if err != nil {
		return store.Run{}, err
	}
	reserved = false
	return run, nil
}
