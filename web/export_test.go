package web

import "os"

// WrapTempFile replaces how an upload's temporary file is created with
// wrap of the server's own way (a full disk, in the tests). Call it before
// the server's handler serves anything.
func (s *Server) WrapTempFile(wrap func(next func(pattern string) (*os.File, error)) func(pattern string) (*os.File, error)) {
	s.tempFile = wrap(s.tempFile)
}

// RetainNow runs one retention pass (live.Runs.Retain) at once, as the
// executor does after every task.
func (s *Server) RetainNow() { s.runs.Retain() }
