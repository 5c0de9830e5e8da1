package wire_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/augloader/augloader/wire"
)

// requestCases is testdata/requests/checks.json: the request checks the
// Python client and the server share, so the two cannot drift apart
// (Python refused twin_weights=[] where Go took it as none given).
type requestCases struct {
	Cases []struct {
		Name    string          `json:"name"`
		Request json.RawMessage `json:"request"`
		Valid   bool            `json:"valid"`
	} `json:"cases"`
}

func TestSharedRequestCases(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "testdata", "requests", "checks.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rc requestCases
	if err := json.Unmarshal(b, &rc); err != nil {
		t.Fatal(err)
	}
	if len(rc.Cases) < 20 {
		t.Fatalf("%d cases", len(rc.Cases))
	}
	for _, c := range rc.Cases {
		_, err := wire.DecodeRequest(c.Request)
		if (err == nil) != c.Valid {
			t.Errorf("%s: %s: DecodeRequest err = %v, want valid %v", c.Name, c.Request, err, c.Valid)
		}
	}
}
