package iox

// ReleaseForTest closes td's lock without removing anything, as the kernel
// does when its process is killed.
func ReleaseForTest(td *TempDir) {
	td.lock.Close()
	td.lock = nil
}
