package shard

// Test hooks: the cache's read ahead and cooling, which streams reach
// only through a Schedule.

func (r *Reader) Prefetch(p int) { r.lazy.cache.Prefetch(p) }
func (r *Reader) Cool(p int)     { r.lazy.cache.Cool(p) }
