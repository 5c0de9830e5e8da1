package materialize

// SetAfterRank sets the hook run after each rank's file is written.
func SetAfterRank(f func(rank int)) func() {
	old := afterRank
	afterRank = f
	return func() { afterRank = old }
}
