//go:build linux

package cuda

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// sharedMem is the tensor region both processes map: a memfd the parent
// creates and hands to the worker as an extra file.
type sharedMem struct {
	f    *os.File
	data []byte
}

// newSharedMem creates an anonymous shared-memory file of size bytes.
func newSharedMem(size int64) (*sharedMem, error) {
	fd, err := unix.MemfdCreate("sampviz-tensors", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	m := &sharedMem{f: os.NewFile(uintptr(fd), "sampviz-tensors")}
	if err := m.resize(size); err != nil {
		m.close()
		return nil, err
	}
	return m, nil
}

// openSharedMem maps size bytes of the shared-memory file f (the worker's side).
func openSharedMem(f *os.File, size int64) (*sharedMem, error) {
	m := &sharedMem{f: f}
	if err := m.remap(size); err != nil {
		return nil, err
	}
	return m, nil
}

// resize sets the file to size bytes and maps all of it.
func (m *sharedMem) resize(size int64) error {
	if err := unix.Ftruncate(int(m.f.Fd()), size); err != nil {
		return fmt.Errorf("resize shared memory to %d bytes: %w", size, err)
	}
	return m.remap(size)
}

// remap maps the first size bytes of the file, replacing any earlier mapping.
func (m *sharedMem) remap(size int64) error {
	if m.data != nil {
		if err := unix.Munmap(m.data); err != nil {
			return fmt.Errorf("unmap shared memory: %w", err)
		}
		m.data = nil
	}
	if size == 0 {
		return nil
	}
	data, err := unix.Mmap(int(m.f.Fd()), 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("map %d bytes of shared memory: %w", size, err)
	}
	m.data = data
	return nil
}

func (m *sharedMem) size() int64 { return int64(len(m.data)) }

// close unmaps and closes the file.
func (m *sharedMem) close() error {
	var err error
	if m.data != nil {
		err = unix.Munmap(m.data)
		m.data = nil
	}
	if cerr := m.f.Close(); err == nil {
		err = cerr
	}
	return err
}
