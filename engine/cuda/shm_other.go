//go:build !linux

package cuda

import (
	"errors"
	"os"
)

var errNoMemfd = errors.New("the CUDA worker needs Linux (memfd shared memory)")

type sharedMem struct {
	f    *os.File
	data []byte
}

func newSharedMem(size int64) (*sharedMem, error)              { return nil, errNoMemfd }
func openSharedMem(f *os.File, size int64) (*sharedMem, error) { return nil, errNoMemfd }
func (m *sharedMem) resize(size int64) error                   { return errNoMemfd }
func (m *sharedMem) remap(size int64) error                    { return errNoMemfd }
func (m *sharedMem) size() int64                               { return int64(len(m.data)) }
func (m *sharedMem) close() error                              { return nil }
