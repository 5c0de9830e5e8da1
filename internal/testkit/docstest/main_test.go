package docstest

import (
	"os"
	"testing"

	"github.com/augloader/augloader/internal/testkit/testutil"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testutil.RunCleanups()
	os.Exit(code)
}

// binaries is the folder of the checkout's augloader and shardconv
// (testutil.Binaries: make test's bin/, or built once for the package).
func binaries(t *testing.T) string {
	t.Helper()
	dir, err := testutil.Binaries()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}
