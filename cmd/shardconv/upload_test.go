package main

import (
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/augloader/augloader/internal/testkit/s3test"
	"github.com/augloader/augloader/internal/testkit/testutil"
)

// convert -o s3:// fails before converting when the bucket does not
// exist or the keys are refused (it converted for 40 s and failed at the
// upload); an upload stopped at once (two signals) leaves no temporary
// copy in $TMPDIR (the second signal's exit skipped its removal).
func TestConvertToS3FailsEarly(t *testing.T) {
	srv := s3test.Shared(t)
	tu := filepath.Join(t.TempDir(), "tu")
	if out, errOut, code := run(t, "synth", "--like", "COLLAB", "--graphs", "400", "--seed", "2", "--out", tu); code != 0 {
		t.Fatalf("synth: %s%s", out, errOut)
	}
	srv.Upload(t, "early", "seed", t.TempDir()) // makes the bucket

	for _, tc := range []struct {
		name, out, want string
		env             []string
	}{
		{"no bucket", "s3://nosuchbucket/x", "no such bucket", nil},
		{"wrong key", "s3://early/x", "check the keys", []string{"AWS_SECRET_ACCESS_KEY=wrong"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			cmd := exec.Command(bin, "convert", "-i", tu, "-o", tc.out)
			cmd.Env = append(append(os.Environ(), "TMPDIR="+tmp), tc.env...)
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), tc.want) {
				t.Fatalf("want a failure saying %q, got %v:\n%s", tc.want, err, out)
			}
			if strings.Contains(string(out), "graphs") {
				t.Fatalf("it converted before failing:\n%s", out)
			}
			if left, _ := os.ReadDir(tmp); len(left) > 0 {
				t.Fatalf("left in $TMPDIR: %v", left)
			}
		})
	}

	// stopped upload LOCATION SIGNALS: a convert into LOCATION through a
	// proxy that holds every PUT for 2 s, sent SIGNALS once it has
	// converted; its output and $TMPDIR.
	stoppedUpload := func(t *testing.T, loc string, signals int) (string, string) {
		target, _ := url.Parse(srv.Endpoint)
		slow := httputil.NewSingleHostReverseProxy(target)
		l := testutil.ServeHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPut {
				time.Sleep(2 * time.Second) // an upload that takes a while
			}
			slow.ServeHTTP(w, r)
		}))
		tmp := t.TempDir()
		cmd := testutil.DieWithTest(exec.Command(bin, "convert", "-i", tu, "-o", loc))
		cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "AWS_ENDPOINT_URL="+l)
		var out testutil.SyncBuffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(60 * time.Second); !strings.Contains(out.String(), "graphs"); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("no conversion within 60 s:\n%s", out.String())
			}
		}
		for range signals {
			cmd.Process.Signal(syscall.SIGINT)
		}
		if err := cmd.Wait(); err == nil {
			t.Fatalf("a stopped upload exited 0:\n%s", out.String())
		}
		return out.String(), tmp
	}
	t.Run("stopped", func(t *testing.T) {
		// Two at once: the second is the exit that skips deferred calls.
		out, tmp := stoppedUpload(t, "s3://early/stopped", 2)
		if left, _ := filepath.Glob(filepath.Join(tmp, "*")); len(left) > 0 {
			t.Fatalf("a stopped upload left its copy in $TMPDIR: %v\n%s", left, out)
		}
	})
	t.Run("stopped once, told what is left", func(t *testing.T) {
		// One: the upload stops between files and says what it put and
		// how to delete it (the folder had no manifest before).
		out, tmp := stoppedUpload(t, "s3://early/told", 1)
		for _, want := range []string{"stopped by a signal", "s3://early/told has no manifest", "`shardconv prune s3://early/told`"} {
			if !strings.Contains(out, want) {
				t.Errorf("a stopped upload's message lacks %q:\n%s", want, out)
			}
		}
		if left, _ := filepath.Glob(filepath.Join(tmp, "*")); len(left) > 0 {
			t.Fatalf("a stopped upload left its copy in $TMPDIR: %v\n%s", left, out)
		}
	})
}
