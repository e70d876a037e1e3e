package session

import "errors"

// InputError is a job the session cannot use because of what it was given:
// a dump that cannot be read or breaks a rule of the format, a parameter
// out of range, a backend the session does not have. Its message is one
// sentence for the person who gave it, naming the file, the tensor and the
// rule (an HTTP 4xx, exit status 2); everything else a job returns is the
// session's or the backend's failure.
type InputError struct {
	Msg string
	// Err is the cause (a *dump.Error), or nil.
	Err error
	// OverBudget says the job is refused for the memory it needs (HTTP 413)
	// rather than for a broken rule (400).
	OverBudget bool
}

func (e *InputError) Error() string { return e.Msg }

// Unwrap returns the cause.
func (e *InputError) Unwrap() error { return e.Err }

// ErrNoOutputs is returned by Rejudge (and noted by Row) when a job stored
// no outputs of its own: its kernels never finished, or it ran none.
var ErrNoOutputs = errors.New("this run has no stored outputs")
