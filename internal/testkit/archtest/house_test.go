package archtest

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Files a newcomer can read top-down: no tracked Go or Python source file
// is over maxFileLines unless its header says why ("Long file: …" in its
// first lines), and no function of the loader or the Python client is over
// maxFuncLines. A Python package's __init__.py, the page a reader opens
// first, stays under maxInitLines: what it does not name at once lives in
// the package's modules.
const (
	maxFileLines = 600
	maxFuncLines = 80
	maxInitLines = 200
)

// repoRoot is the checkout's top folder (the test skips outside one).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	return strings.TrimSpace(string(root))
}

func trackedSources(t *testing.T) (string, []string) {
	t.Helper()
	dir := repoRoot(t)
	out, err := exec.Command("git", "-C", dir, "ls-files", "*.go", "*.py").Output()
	if err != nil {
		t.Fatal(err)
	}
	return dir, strings.Fields(string(out))
}

func TestFileLengths(t *testing.T) {
	dir, files := trackedSources(t)
	for _, name := range files {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			continue // deleted in the work tree
		}
		n, reason := 0, false
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			n++
			if n <= 40 && (strings.Contains(sc.Text(), "Long file:") || strings.Contains(sc.Text(), "Code generated")) {
				reason = true
			}
		}
		f.Close()
		if strings.HasSuffix(name, "/__init__.py") && n > maxInitLines {
			t.Errorf("%s: %d lines (over %d): move what a reader needs second into the package's modules", name, n, maxInitLines)
		}
		if n > maxFileLines && !reason {
			t.Errorf("%s: %d lines (over %d): split it along its stories, or say why in its header (\"Long file: …\")", name, n, maxFileLines)
		}
	}
}

func TestLoaderFunctionLengths(t *testing.T) {
	dir, files := trackedSources(t)
	fs := token.NewFileSet()
	for _, name := range files {
		if !strings.HasPrefix(name, "loader/") || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fs, filepath.Join(dir, name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				if n := fs.Position(fd.End()).Line - fs.Position(fd.Pos()).Line + 1; n > maxFuncLines {
					t.Errorf("%s: %s is %d lines (over %d)", name, fd.Name.Name, n, maxFuncLines)
				}
			}
		}
	}
}

func TestClientFunctionLengths(t *testing.T) {
	dir, files := trackedSources(t)
	var client []string
	for _, name := range files {
		if strings.HasPrefix(name, "clients/python/augloader/") {
			client = append(client, filepath.Join(dir, name))
		}
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 to parse the client with")
	}
	script := `import ast, sys
for p in sys.argv[2:]:
    for n in ast.walk(ast.parse(open(p).read())):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > int(sys.argv[1]):
            print(p, n.name, n.end_lineno - n.lineno + 1)
`
	out, err := exec.Command(py, append([]string{"-c", script, strconv.Itoa(maxFuncLines)}, client...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("parsing the client: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line != "" {
			t.Errorf("%s lines (over %d)", line, maxFuncLines)
		}
	}
}
