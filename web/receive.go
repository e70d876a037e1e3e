package web

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	"github.com/sampviz/sampviz/engine"
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
	// fields are the form's run parameters sent as fields beside a dump
	// (formParams), as the home page's form sends them without its script.
	fields url.Values
}

// formParams are the run parameters an upload form may send as fields.
var formParams = map[string]bool{"semantics": true}

// maxTokenizer bounds a tokenizer.json sent beside a dump.
const maxTokenizer = 64 << 20

// receive streams the upload into a temporary file, hashing it on the way,
// at no less than the server's minimum rate (minRate). A form may carry a
// tokenizer.json beside the dump, in a file field named "tokenizer": it is
// returned as the second upload (nil without one). The form's fields that
// name run parameters (formParams) come with the dump (upload.fields).
func (s *Server) receive(w http.ResponseWriter, r *http.Request) (dump, tokenizer *upload, err error) {
	r.Body = newMinRate(r.Body, http.NewResponseController(w), s.cfg.MinUploadRate, s.cfg.UploadWindow)
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct == "multipart/form-data" {
		mr, err := r.MultipartReader()
		if err != nil {
			return nil, nil, badRequest("The upload is not a readable form; send the dump as the form's file, or as the raw request body.")
		}
		drop := func() {
			for _, u := range []*upload{dump, tokenizer} {
				if u != nil {
					os.Remove(u.path)
				}
			}
		}
		fields := url.Values{}
		for {
			part, err := mr.NextPart()
			if errors.Is(err, io.EOF) && dump != nil {
				dump.fields = fields
				return dump, tokenizer, nil
			}
			if err != nil {
				drop()
				if tooLarge(err) {
					return nil, nil, s.errTooLarge("the upload")
				}
				if errors.Is(err, errTooSlow) {
					return nil, nil, s.errSlowUpload("", err)
				}
				if dump == nil && errors.Is(err, io.EOF) {
					return nil, nil, badRequest("The form carried no file: choose a dump (.safetensors, .npz, .npy or .pt) and send it again.")
				}
				return nil, nil, &httpError{Status: http.StatusBadRequest, Msg: "The upload was cut off before its end; send it again.", Err: err}
			}
			if part.FileName() == "" {
				if name := part.FormName(); formParams[name] {
					v, _ := io.ReadAll(io.LimitReader(part, 256))
					fields.Set(name, string(v))
				}
				part.Close()
				continue
			}
			var up *upload
			if part.FormName() == "tokenizer" && tokenizer == nil {
				up, err = s.receiveTokenizer(part, cleanName(part.FileName()))
				tokenizer = up
			} else if dump == nil {
				up, err = s.receiveBody(part, cleanName(part.FileName()))
				dump = up
			}
			part.Close()
			if err != nil {
				drop()
				return nil, nil, err
			}
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
	dump, err = s.receiveBody(r.Body, cleanName(name))
	return dump, nil, err
}

// receiveTokenizer copies a tokenizer.json sent beside a dump into a
// temporary file; the session reads it (and says what is wrong with it).
func (s *Server) receiveTokenizer(body io.Reader, name string) (*upload, error) {
	if name == "" || name == "upload" {
		name = "tokenizer.json"
	}
	f, err := s.tempFile("tokenizer-*.json")
	if err != nil {
		return nil, storeError(err)
	}
	var werr error
	n, err := io.Copy(writeErr{f, &werr}, io.LimitReader(body, maxTokenizer+1))
	if cerr := f.Close(); err == nil {
		err, werr = cerr, cerr
	}
	switch {
	case err == nil && n > maxTokenizer:
		err = &httpError{Status: http.StatusRequestEntityTooLarge, Msg: fmt.Sprintf("%s is larger than a tokenizer.json may be (%s).", name, engine.FormatBytes(maxTokenizer))}
	case err != nil && tooLarge(err):
		err = s.errTooLarge(name)
	case err != nil && errors.Is(err, errTooSlow):
		err = s.errSlowUpload(name, err)
	case err != nil && werr != nil:
		err = storeError(werr)
	case err != nil:
		err = &httpError{Status: http.StatusBadRequest, Msg: fmt.Sprintf("The upload of %s was cut off before its end; send it again.", name), Err: err}
	}
	if err != nil {
		os.Remove(f.Name())
		return nil, err
	}
	return &upload{name: name, ext: ".json", path: f.Name(), size: n}, nil
}

// receiveBody copies body into a temporary file named after its container.
func (s *Server) receiveBody(body io.Reader, name string) (*upload, error) {
	br := bufio.NewReaderSize(body, 64<<10)
	head, err := br.Peek(9)
	if err != nil && !errors.Is(err, io.EOF) {
		if tooLarge(err) {
			return nil, s.errTooLarge(name)
		}
		if errors.Is(err, errTooSlow) {
			return nil, s.errSlowUpload(name, err) // slow from its first bytes
		}
		return nil, &httpError{Status: http.StatusBadRequest, Msg: fmt.Sprintf("The upload of %s was cut off before its end; send it again.", name), Err: err}
	}
	// An empty file is the session's to refuse, in the words `sampviz
	// check` uses.
	ext := dumpExt(name, head)
	if name == "" || name == "upload" {
		name = "upload" + ext
	}
	f, err := s.tempFile("upload-*" + ext)
	if err != nil {
		return nil, storeError(err)
	}
	h := sha256.New()
	var werr error // the file's side: a full disk is the server's fault
	n, err := io.Copy(io.MultiWriter(writeErr{f, &werr}, h), br)
	if err == nil {
		err = f.Sync() // on disk before it is adopted by a rename
		werr = err
	}
	if cerr := f.Close(); err == nil {
		err, werr = cerr, cerr
	}
	if err != nil {
		os.Remove(f.Name())
		switch {
		case tooLarge(err):
			return nil, s.errTooLarge(name)
		case errors.Is(err, errTooSlow):
			return nil, s.errSlowUpload(name, err)
		case werr != nil:
			return nil, storeError(werr)
		}
		return nil, &httpError{Status: http.StatusBadRequest, Msg: fmt.Sprintf("The upload of %s was cut off before its end; send it again.", name), Err: err}
	}
	return &upload{name: name, ext: ext, path: f.Name(), sha: hex.EncodeToString(h.Sum(nil)), size: n}, nil
}

// dumpExt picks the extension of the stored file: the name's when it has a
// known one, else the one its first bytes say (numpy's magic, a zip's),
// else .safetensors. The session tells the container from the content and
// the uploader's name, as `sampviz check` does, never from this.
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

// tooLarge reports whether err is a body cut off at the upload limit.
func tooLarge(err error) bool {
	var mbe *http.MaxBytesError
	return errors.As(err, &mbe)
}

// errTooLarge is the 413 of an upload named name over the limit.
func (s *Server) errTooLarge(name string) *httpError {
	return &httpError{
		Status: http.StatusRequestEntityTooLarge,
		Msg:    fmt.Sprintf("%s is larger than this server's upload limit of %s (sampviz serve --max-upload).", name, engine.FormatBytes(s.cfg.MaxUpload)),
	}
}

// writeErr keeps the error of the writer it wraps, so that a failed copy
// says whether the client's side or the disk's failed.
type writeErr struct {
	w   io.Writer
	err *error
}

func (w writeErr) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	if err != nil {
		*w.err = err
	}
	return n, err
}

// errTooSlow is an upload that arrived slower than the minimum rate.
var errTooSlow = errors.New("upload slower than the minimum rate")

// errSlowUpload is the 408 of an upload named name ("" before a form has
// named it) that arrived slower than the minimum rate.
func (s *Server) errSlowUpload(name string, err error) *httpError {
	what := "The upload"
	if name != "" {
		what += " of " + name
	}
	return &httpError{Status: http.StatusRequestTimeout, Err: err,
		Msg: fmt.Sprintf("%s arrived slower than %s a second over %s; send it again on a faster link.", what, engine.FormatBytes(s.cfg.MinUploadRate), s.cfg.UploadWindow)}
}

// minRate is an upload's body that must arrive at rate bytes a second,
// measured over windows: a client that sends a byte now and then cannot
// hold a connection (and the memory of its request) for long. A window
// ends once it has had its rate's bytes (the next starts then) or when its
// time is up, and then the body is too slow. The connection's read
// deadline is the current window's end, since the server's ReadTimeout
// would cut a long upload on a good link: a read still waiting then has
// not had the window's bytes. The write deadline moves on with it, since
// the server's WriteTimeout, counted from the request's head, would leave
// no time to answer a long upload; once the body has ended the read
// deadline goes, since net/http then reads on behind it and a read that
// hits a deadline cancels the request's context.
type minRate struct {
	r      io.ReadCloser
	rc     *http.ResponseController
	rate   int64
	window time.Duration
	start  time.Time // of the current window
	got    int64     // bytes in the current window
}

func newMinRate(r io.ReadCloser, rc *http.ResponseController, rate int64, window time.Duration) *minRate {
	return &minRate{r: r, rc: rc, rate: rate, window: window, start: time.Now()}
}

// answerWait is the least time the answer to an upload has to be written
// once its body is in.
const answerWait = time.Minute

func (m *minRate) Read(p []byte) (int, error) {
	now := time.Now()
	need := int64(float64(m.rate) * m.window.Seconds())
	if m.got >= need || now.Sub(m.start) >= m.window {
		if m.got < need {
			return 0, errTooSlow
		}
		m.start, m.got = now, 0
	}
	// The rest of this window is all a read may wait.
	m.rc.SetReadDeadline(m.start.Add(m.window))
	m.rc.SetWriteDeadline(m.start.Add(m.window + answerWait))
	n, err := m.r.Read(p)
	m.got += int64(n)
	switch {
	case err == io.EOF:
		m.rc.SetReadDeadline(time.Time{})
	case err != nil && errors.Is(err, os.ErrDeadlineExceeded):
		err = errTooSlow
	}
	return n, err
}

func (m *minRate) Close() error { return m.r.Close() }
