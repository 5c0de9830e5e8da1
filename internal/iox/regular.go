package iox

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular: a path where a regular file is expected names a FIFO, a
// device, a socket or a folder.
var ErrNotRegular = errors.New("not a regular file")

// OpenRegular opens path for reading when it is a regular file (symbolic
// links followed) and refuses anything else at once: opening a FIFO for
// reading blocks until a writer comes, and reading a device may never
// end, past any signal. The open itself does not block (O_NONBLOCK, which
// changes nothing for a regular file), and the file is checked after it
// is open, so it cannot be swapped in between.
func OpenRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w (%s)", ErrNotRegular, kind(st.Mode()))}
	}
	return f, nil
}

// ReadRegular reads the regular file at path whole, refusing anything
// else (OpenRegular) and a file of more than limit bytes.
func ReadRegular(path string, limit int64) ([]byte, error) {
	f, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("more than %d bytes", limit)}
	}
	return b, nil
}

func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeDevice != 0 || m&fs.ModeCharDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a folder"
	}
	return m.Type().String()
}
