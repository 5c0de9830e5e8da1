package docstest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/augloader/augloader/internal/testkit/testutil"
)

// A fenced block of the README and docs/ is a command or snippet when its
// language is sh, bash or python; each says, after the language, whether a
// test runs it ("test") or why none does ("not-run: REASON"). Other
// blocks (ini, json, diagrams) are not commands.
var fence = regexp.MustCompile("(?s)```([^\n]*)\n(.*?)```")

type block struct {
	file, lang, tag, body string
	line                  int
}

func docBlocks(t *testing.T, root string) []block {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	paths = append([]string{filepath.Join(root, "README.md")}, paths...)
	var out []block
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		for _, m := range fence.FindAllStringSubmatchIndex(s, -1) {
			info := strings.TrimSpace(s[m[2]:m[3]])
			lang, tag, _ := strings.Cut(info, " ")
			out = append(out, block{file: filepath.Base(p), lang: lang, tag: strings.TrimSpace(tag), body: s[m[4]:m[5]],
				line: strings.Count(s[:m[0]], "\n") + 1})
		}
	}
	return out
}

func command(lang string) bool { return lang == "sh" || lang == "bash" || lang == "python" }

// Every command and snippet either runs in a test or says why it does
// not (the serve --help twins example and docs/contrastive.md's Go
// example failed as written, and nothing ran them).
func TestEveryBlockDeclared(t *testing.T) {
	n := 0
	for _, b := range docBlocks(t, testutil.Root(t)) {
		if !command(b.lang) {
			continue
		}
		n++
		reason, notRun := strings.CutPrefix(b.tag, "not-run:")
		switch {
		case b.tag == "test":
		case b.tag == "test-torchrun":
			// Run under a torch that has a working torchrun (.venv-torch2)
			// by the Python test that names the tag.
			if src, err := os.ReadFile(filepath.Join(testutil.Root(t), "clients", "python", "tests", "test_elastic.py")); err != nil ||
				!strings.Contains(string(src), `"test-torchrun"`) {
				t.Errorf("%s:%d: tagged test-torchrun, but clients/python/tests/test_elastic.py does not run such blocks", b.file, b.line)
			}
		case notRun && len(strings.TrimSpace(reason)) >= 10:
		default:
			t.Errorf("%s:%d: a %s block tagged %q: tag it \"test\" (run by TestDocBlocks or TestDeployGuide), \"test-torchrun\" (run by test_elastic.py) or \"not-run: REASON\"",
				b.file, b.line, b.lang, b.tag)
		}
	}
	if n < 10 {
		t.Fatalf("only %d command blocks found", n)
	}
}

// TestDocBlocks runs the "test" blocks of the README and docs/ (but
// deploy.md's, which TestDeployGuide runs), each file's in order in one
// shell, sh blocks as written and python blocks with the test venv's
// Python, in a folder laid out as the checkout's root (bin/ freshly built,
// .venv, examples/, ../shared) that also holds collab.shards, a synthetic
// COLLAB. Where blocks read a daemon at /tmp/aug.sock, the test serves
// collab.shards at a socket of its own and points the blocks there; the
// blocks' other /tmp sockets move under the test's folder too.
func TestDocBlocks(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the documentation's commands take a minute or two")
	}
	root := testutil.Root(t)
	py := filepath.Join(root, ".venv", "bin", "python")
	if _, err := os.Stat(py); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing (make test creates it before the Go tests)", py)
		}
		t.Skipf("%s absent: make venv, then run this test", py)
	}
	if _, err := os.Stat(filepath.Join(root, "..", "shared", "datasets", "tu", "MUTAG")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("../shared/datasets/tu/MUTAG is missing (CI=true requires ../shared/datasets)")
		}
		t.Skip("../shared/datasets absent: the README's MUTAG commands read it")
	}
	byFile := map[string][]block{}
	var order []string
	for _, b := range docBlocks(t, root) {
		if b.tag != "test" || !command(b.lang) || b.file == "deploy.md" {
			continue
		}
		if byFile[b.file] == nil {
			order = append(order, b.file)
		}
		byFile[b.file] = append(byFile[b.file], b)
	}
	if len(byFile["README.md"]) < 3 {
		t.Fatalf("README.md has %d test blocks", len(byFile["README.md"]))
	}
	for _, file := range order {
		t.Run(file, func(t *testing.T) {
			top := t.TempDir()
			dir := filepath.Join(top, "p")
			bin := filepath.Join(dir, "bin")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, l := range []struct{ link, to string }{
				{bin, binaries(t)},
				{filepath.Join(dir, ".venv"), filepath.Join(root, ".venv")},
				{filepath.Join(dir, "examples"), filepath.Join(root, "examples")},
				{filepath.Join(top, "shared"), filepath.Join(root, "..", "shared")},
			} {
				if err := os.Symlink(l.to, l.link); err != nil {
					t.Fatal(err)
				}
			}
			sock := filepath.Join(top, "aug.sock")
			var script strings.Builder
			fmt.Fprintf(&script, `set -euxo pipefail
bin/shardconv synth --like COLLAB --graphs 300 --seed 1 --out collab-tu >/dev/null
bin/shardconv convert -q -i collab-tu -o collab.shards
bin/augloader serve --shards collab.shards --socket %s --policy nodesam >serve.ready 2>serve.log &
until grep -q '"ready":true' serve.ready; do sleep 0.1; done
`, sock)
			for i, b := range byFile[file] {
				// Sockets of their own: tests run side by side.
				body := strings.ReplaceAll(b.body, "/tmp/aug.sock", sock)
				body = strings.ReplaceAll(body, "/tmp/mutag.sock", filepath.Join(top, "mutag.sock"))
				fmt.Fprintf(&script, "# %s:%d\n", file, b.line)
				if b.lang == "python" {
					name := fmt.Sprintf("block-%d.py", i)
					if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
						t.Fatal(err)
					}
					fmt.Fprintf(&script, "\"$PYTHON\" %s\n", name)
				} else {
					script.WriteString(body)
				}
			}
			runScript(t, dir, script.String(), []string{
				"PATH=" + bin + ":" + os.Getenv("PATH"), "PYTHON=" + py, "PYTHONPATH=" + filepath.Join(root, "clients", "python"),
				"AUGLOADER_BIN=" + bin, "OMP_NUM_THREADS=1",
			})
		})
	}
}

// runScript runs a bash script in dir, its process group killed at the
// end (daemons the blocks start in the background included).
func runScript(t *testing.T, dir, script string, env []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// Output to a file, not a pipe: a daemon a block leaves serving (as
	// the README's user would) holds the pipe open past the script's end.
	log, err := os.Create(filepath.Join(dir, "script.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	err = cmd.Run()
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	out, _ := os.ReadFile(log.Name())
	if ctx.Err() != nil {
		t.Fatalf("the blocks did not finish in 8 minutes:\n%s", out)
	}
	if err != nil {
		logs, _ := os.ReadFile(filepath.Join(dir, "serve.log"))
		t.Fatalf("a block failed: %v\n%s\n--- serve.log\n%s", err, out, logs)
	}
}
