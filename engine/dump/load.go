package dump

import (
	"context"

	"github.com/sampviz/sampviz/engine"
)

// Reading a tensor of a mapped safetensors or npy file costs nothing but the
// pages it touches. Two kinds cost memory of their own: a deflated npz member
// must be inflated, and a big-endian npy array byte-swapped, each into a
// buffer of the tensor's size. Those are deferred: Open and Parse read their
// headers only, and File.Load inflates or converts the tensors a run uses,
// within the file's limit, so that a member the run never reads is never
// inflated and a bomb is refused before it is.

// DefaultLoadLimit is the memory File.Load may take when File.Limit is 0.
const DefaultLoadLimit = 1 << 30

// deferredData is the data of one tensor that costs memory to read.
type deferredData struct {
	bytes int64
	// how says what reading it takes ("inflating the zip member",
	// "byte-swapping the big-endian array"), for messages.
	how  string
	load func() ([]byte, error)
	// verify, when not nil, reads the data as load would, into nothing,
	// and returns load's error, if any.
	verify func(ctx context.Context) error
}

// Load makes the data of the tensors called names readable: deflated npz
// members are inflated and big-endian arrays converted, once each, and only
// while the memory they take in all stays within f.Limit (DefaultLoadLimit
// when 0). Tensors that need nothing, and names the file lacks, are skipped.
// Its errors are *Error.
func (f *File) Load(names ...string) error {
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultLoadLimit
	}
	for _, name := range names {
		d := f.deferred[name]
		t := f.Tensor(name)
		if d == nil || t == nil {
			continue
		}
		if f.held+d.bytes > limit {
			return tensorError(f.Name, name, "%s takes %s of memory, and with the %s already held that is more than the %s this run may hold (--max-memory)",
				d.how, engine.FormatBytes(d.bytes), engine.FormatBytes(f.held), engine.FormatBytes(limit))
		}
		data, err := d.load()
		if err != nil {
			return err
		}
		if int64(len(data)) != d.bytes {
			return tensorError(f.Name, name, "%s gave %d bytes, want %d", d.how, len(data), d.bytes)
		}
		t.Data = data
		f.held += d.bytes
		delete(f.deferred, name)
	}
	return nil
}

// Verify reads the data of the tensors called names that Load has not
// loaded yet as Load would, keeping none of it, and returns the *Error Load
// would: a deflated npz member is inflated through a small buffer, so that
// one that fails its CRC or inflates past its declared size is refused
// before a run is accepted, at the cost of the time it takes to inflate
// (what a run may hold bounds it), not of its memory. It stops with ctx's
// error when ctx is done.
func (f *File) Verify(ctx context.Context, names ...string) error {
	for _, name := range names {
		if d := f.deferred[name]; d != nil && d.verify != nil {
			if err := d.verify(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// Deferred returns the memory that loading the tensors called names would
// take (0 for those that need nothing).
func (f *File) Deferred(names ...string) int64 {
	var n int64
	for _, name := range names {
		if d := f.deferred[name]; d != nil {
			n += d.bytes
		}
	}
	return n
}

// Held returns the memory the file's loaded tensors took (inflated and
// converted data; not the mapping).
func (f *File) Held() int64 { return f.held }

// deferLoad records that tensor t's data must be loaded with load, taking
// bytes of memory, and returns the record (to which a verify may be added).
func (f *File) deferLoad(t *engine.Tensor, bytes int64, how string, load func() ([]byte, error)) *deferredData {
	if f.deferred == nil {
		f.deferred = map[string]*deferredData{}
	}
	d := &deferredData{bytes: bytes, how: how, load: load}
	f.deferred[t.Name] = d
	return d
}
