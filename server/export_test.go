package server

import (
	"testing"

	"golang.org/x/sys/unix"
)

// Memfd makes a memfd of size bytes with the given seals, as a
// shared-memory client makes its ring (closed at cleanup); skips where
// there is none.
func Memfd(t testing.TB, size int64, seals int) int {
	t.Helper()
	fd, err := unix.MemfdCreate("augloader-test-ring", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Skipf("no memfd here: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Ftruncate(fd, size); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		t.Fatal(err)
	}
	return fd
}
