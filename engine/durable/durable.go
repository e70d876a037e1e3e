// Package durable writes files so that a crash, a full disk or a failed
// writer never leaves a half-written file where a reader looks: the bytes go
// to a temporary file in the same folder, are synced to the disk, and only
// then renamed into place (and the folder synced, so that the rename
// survives a power cut). The server's run index and the session's stored
// outputs are written through it.
package durable

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// WriteFile writes path with write, atomically: readers see the old file
// (or none) until the new one is whole and on disk. On any error nothing is
// left behind but the old file. The error wraps the cause (a full disk is
// syscall.ENOSPC), naming only the file's base name.
func WriteFile(path string, write func(w io.Writer) error) error {
	dir, base := filepath.Dir(path), filepath.Base(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create folder for %s: %w", base, err)
	}
	f, err := os.CreateTemp(dir, "."+base+".*")
	if err != nil {
		return fmt.Errorf("create %s: %w", base, err)
	}
	defer os.Remove(f.Name()) // a no-op once renamed
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", base, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", base, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", base, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("rename %s: %w", base, err)
	}
	return SyncDir(dir)
}

// SyncDir flushes a folder's entries (a rename into it) to the disk. File
// systems that cannot sync a folder are not an error.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync folder: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !isUnsupported(err) {
		return fmt.Errorf("sync folder: %w", err)
	}
	return nil
}
