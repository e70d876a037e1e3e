//go:build !unix

package dump

import (
	"errors"
	"fmt"
	"os"
)

// mapFile reads the regular file at path into memory: this platform has no
// mmap through golang.org/x/sys/unix, so the file is held once in a buffer.
func mapFile(path string) ([]byte, func() error, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, errors.New("not a regular file")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read: %w", err)
	}
	return data, func() error { return nil }, nil
}
