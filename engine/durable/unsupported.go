package durable

import (
	"errors"
	"syscall"
)

// isUnsupported reports whether a folder sync failed only because the file
// system cannot do it.
func isUnsupported(err error) bool {
	return errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.EBADF)
}
