package web

import (
	"errors"
	"fmt"
	"net/http"
	"syscall"

	"github.com/sampviz/sampviz/web/live"
)

// httpError is what a handler returns when it cannot answer: Msg is the one
// sentence the client sees, Err the wrapped cause that only the log gets.
type httpError struct {
	Status int
	Msg    string
	Err    error
	// RetryAfter, in seconds, is sent with 429 and 503.
	RetryAfter int
}

// Error says both what the client sees and the cause, for the log.
func (e *httpError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%d %s: %v", e.Status, e.Msg, e.Err)
	}
	return fmt.Sprintf("%d %s", e.Status, e.Msg)
}

// Unwrap returns the cause.
func (e *httpError) Unwrap() error { return e.Err }

// internal wraps an unexpected error: the client reads a plain sentence.
func internal(err error) *httpError {
	return &httpError{Status: http.StatusInternalServerError, Msg: "Something went wrong inside sampviz; the server log has the details.", Err: err}
}

// notFound is a 404 with its one sentence.
func notFound(msg string) *httpError {
	return &httpError{Status: http.StatusNotFound, Msg: msg}
}

// badRequest is a 400 with its one sentence.
func badRequest(msg string) *httpError {
	return &httpError{Status: http.StatusBadRequest, Msg: msg}
}

// asHTTPError turns any handler error into an httpError.
func asHTTPError(err error) *httpError {
	var he *httpError
	if errors.As(err, &he) {
		return he
	}
	return internal(err)
}

// retryAfter is what a 429 tells a client to wait, in seconds.
const retryAfter = 30

// errQueueFull is the 429 of a full queue, which holds n runs.
func errQueueFull(n int) *httpError {
	return &httpError{
		Status:     http.StatusTooManyRequests,
		Msg:        fmt.Sprintf("sampviz is busy: its queue of %d runs is full. Try again in %d seconds.", n, retryAfter),
		RetryAfter: retryAfter,
	}
}

// storeError is what a client is told when the data directory refused a
// write: 507 when the disk is full (the client is not at fault, and nothing
// stored is lost), else a 500; the cause goes to the log.
func storeError(err error) *httpError {
	if errors.Is(err, syscall.ENOSPC) {
		return &httpError{Status: http.StatusInsufficientStorage, Msg: live.DiskFull, Err: err}
	}
	return internal(err)
}
