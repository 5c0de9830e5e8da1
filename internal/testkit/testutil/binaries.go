package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// Binaries is the folder of the checkout's commands (augloader and
// shardconv), for tests that run them as a user does. make test builds
// them once into bin/ and names that folder in AUGLOADER_BIN (as for the
// Python tests), so no package links them again; without AUGLOADER_BIN
// they are built here, once per test process, into a temporary folder
// removed by RunCleanups (fixture.Main and fixture.Cleanup call it).
// An AUGLOADER_BIN without both commands is an error, never a fallback
// to other binaries.
func Binaries() (string, error) {
	binOnce.Do(func() { binDir, binErr = binaries() })
	return binDir, binErr
}

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

func binaries() (string, error) {
	if d := os.Getenv("AUGLOADER_BIN"); d != "" {
		for _, name := range []string{"augloader", "shardconv"} {
			if fi, err := os.Stat(filepath.Join(d, name)); err != nil || fi.Mode()&0o111 == 0 {
				return "", fmt.Errorf("testutil: AUGLOADER_BIN=%s: no executable %s there (make build writes bin/)", d, name)
			}
		}
		return d, nil
	}
	dir, err := os.MkdirTemp("", "augloader-bin-")
	if err != nil {
		return "", err
	}
	AtCleanup(func() { os.RemoveAll(dir) })
	if out, err := exec.Command("go", "build", "-o", dir+"/", "github.com/augloader/augloader/cmd/...").CombinedOutput(); err != nil {
		return "", fmt.Errorf("testutil: go build ./cmd/...: %v\n%s", err, out)
	}
	return dir, nil
}
