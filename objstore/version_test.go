package objstore

import "testing"

// An object's version is its ETag, else its Last-Modified time (a store
// that gives no ETag for a file put there by hand), else none: not cached.
func TestObjectVersion(t *testing.T) {
	for _, tc := range []struct {
		o    object
		want string
	}{
		{object{etag: `"abc"`, modified: 5}, `etag:"abc"`},
		{object{modified: 5}, "modified:5"},
		{object{}, ""},
	} {
		if got := tc.o.Version(); got != tc.want {
			t.Errorf("%+v: version %q, want %q", tc.o, got, tc.want)
		}
	}
}
