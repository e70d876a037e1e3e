package dump

import "fmt"

// Error is what every reading and run-building failure of this package
// returns: one sentence naming the file, the tensor when there is one, and the
// rule the file broke. Callers branch on it with errors.As (an HTTP 4xx, exit
// code 2).
type Error struct {
	// File is the dump's base name ("dump.safetensors").
	File string
	// Tensor is the tensor (or npz member) the rule is about, or "".
	Tensor string
	// Rule says what is wrong, in words: "1000 bytes of data, but shape
	// [2, 3] of F32 needs 24".
	Rule string
	// Err is the underlying cause (a JSON syntax or I/O error), or nil.
	Err error
	// Need, when not 0, is the memory that reading the file would take, and
	// NeedFor what would take it ("unpickling archive/data.pkl"): the file
	// broke no rule of the format but the bound on that memory (File.Limit),
	// which a caller may state in its own words (an HTTP 413).
	Need    int64
	NeedFor string
}

// Error formats e as `FILE: tensor "NAME": RULE: CAUSE`, leaving out the parts
// that are empty.
func (e *Error) Error() string {
	s := e.File + ": "
	if e.Tensor != "" {
		s += fmt.Sprintf("tensor %q: ", e.Tensor)
	}
	s += e.Rule
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// fileError returns an *Error about the file as a whole.
func fileError(file, format string, args ...any) *Error {
	return &Error{File: file, Rule: fmt.Sprintf(format, args...)}
}

// tensorError returns an *Error about one tensor of the file.
func tensorError(file, tensor, format string, args ...any) *Error {
	return &Error{File: file, Tensor: tensor, Rule: fmt.Sprintf(format, args...)}
}
