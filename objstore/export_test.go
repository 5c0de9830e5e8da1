package objstore

// SetPartSize sets the multipart part size until the returned func runs.
func SetPartSize(n int64) (restore func()) {
	old := partSize
	partSize = n
	return func() { partSize = old }
}
