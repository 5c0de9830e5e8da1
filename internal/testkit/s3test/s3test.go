// Package s3test starts a real S3-compatible server for tests: s3proxy
// (Java, its filesystem backend in a temporary folder) on a loopback
// port, stopped when the test ends. The jar is AUGLOADER_S3PROXY_JAR or
// .cache/s3proxy-VERSION.jar in the repository (`make s3proxy` fetches
// it from Maven Central and checks its SHA-256; .ci/run does). Without
// it, or without java, a test fails under CI=true and skips elsewhere,
// saying so.
package s3test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/augloader/augloader/internal/testkit/testutil"
	"github.com/augloader/augloader/objstore"
)

// Version is the s3proxy release the tests run.
const Version = "2.7.0"

// Access keys of the test server.
const (
	AccessKey = "augloader"
	SecretKey = "augloader-secret"
)

// Server is a running s3proxy.
type Server struct {
	// Endpoint is its URL (http://127.0.0.1:PORT).
	Endpoint string
	log      *testutil.SyncBuffer
	jar      string
	conf     string
	addr     string
	// wrap runs the server through a command (ip netns exec NS): it is
	// then waited for by its log, not by a dial from here.
	wrap   []string
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan error
}

// InNamespace starts an s3proxy inside network namespace ns, listening on
// every address there at port, with folders already in place: objects
// maps "BUCKET/PREFIX" to a local folder whose files become its objects.
// The caller points readers at it (Env) by an address they can reach.
func InNamespace(t testing.TB, ns string, port int, objects map[string]string) *Server {
	t.Helper()
	jar := Jar(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	for where, from := range objects {
		to := filepath.Join(data, filepath.FromSlash(where))
		if err := os.MkdirAll(to, 0o755); err != nil {
			t.Fatal(err)
		}
		ents, err := os.ReadDir(from)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join(from, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	s := &Server{log: new(testutil.SyncBuffer), jar: jar, addr: fmt.Sprintf("0.0.0.0:%d", port), wrap: []string{"ip", "netns", "exec", ns}}
	s.conf = writeConf(t, dir, s.addr, data)
	s.start(t)
	t.Cleanup(s.stop)
	return s
}

// writeConf writes s3proxy's properties for addr and data.
func writeConf(t testing.TB, dir, addr, data string) string {
	conf, err := writeConfig(dir, addr, data)
	if err != nil {
		t.Fatal(err)
	}
	return conf
}

// writeConfig writes s3proxy's properties for addr and data into dir.
func writeConfig(dir, addr, data string) (string, error) {
	conf := filepath.Join(dir, "s3proxy.conf")
	props := fmt.Sprintf(`s3proxy.endpoint=http://%s
s3proxy.authorization=aws-v2-or-v4
s3proxy.identity=%s
s3proxy.credential=%s
s3proxy.v4-max-non-chunked-request-size=4294967296
jclouds.provider=filesystem
jclouds.filesystem.basedir=%s
`, addr, AccessKey, SecretKey, data)
	return conf, os.WriteFile(conf, []byte(props), 0o644)
}

// Jar returns the s3proxy jar's path, or fails (CI) or skips the test.
func Jar(t testing.TB) string {
	t.Helper()
	jar := os.Getenv("AUGLOADER_S3PROXY_JAR")
	if jar == "" {
		jar = filepath.Join(testutil.Root(t), ".cache", "s3proxy-"+Version+".jar")
	}
	_, err := os.Stat(jar)
	if err == nil {
		_, err = exec.LookPath("java")
	}
	if err != nil {
		msg := fmt.Sprintf("the S3 test server is not installed (%v): `make s3proxy` fetches s3proxy %s (needs java)", err, Version)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return jar
}

// Start runs an s3proxy until the test ends and points the AWS
// configuration of this process at it (t.Setenv: AWS_ENDPOINT_URL, keys,
// region; no profile or shared files of the machine's).
func Start(t testing.TB) *Server {
	t.Helper()
	jar := Jar(t)
	dir := t.TempDir()
	s, err := newServer(dir, filepath.Join(dir, "data"), jar)
	if err != nil {
		t.Fatal(err)
	}
	s.start(t)
	t.Cleanup(s.stop)
	s.Env(t, s.Endpoint)
	return s
}

// Shared is a server for the tests of one test binary that neither stop
// nor restart it: one JVM started by the first test that asks (each
// start costs seconds, more under load; a package started a dozen), each
// test given an empty store (every bucket removed when it ends; the tests
// of a package run one at a time) and this process's AWS configuration
// pointed at it as Start does. It is stopped and its folder removed by
// fixture.Cleanup (the packages' TestMain), or dies with the process.
func Shared(t testing.TB) *Server {
	t.Helper()
	jar := Jar(t)
	shared.once.Do(func() {
		dir, err := os.MkdirTemp("", "s3test-")
		if err != nil {
			shared.err = err
			return
		}
		testutil.AtCleanup(func() {
			if shared.s != nil {
				shared.s.stop()
			}
			os.RemoveAll(dir)
		})
		data := filepath.Join(dir, "data")
		s, err := newServer(dir, data, jar)
		if err == nil {
			err = s.launch()
		}
		shared.s, shared.data, shared.err = s, data, err
	})
	if shared.err != nil {
		t.Fatalf("the shared S3 test server: %v", shared.err)
	}
	t.Cleanup(func() {
		ents, _ := os.ReadDir(shared.data)
		for _, e := range ents {
			os.RemoveAll(filepath.Join(shared.data, e.Name()))
		}
	})
	shared.s.Env(t, shared.s.Endpoint)
	return shared.s
}

var shared struct {
	once sync.Once
	s    *Server
	data string
	err  error
}

// newServer is a loopback server's configuration in dir, its objects
// under data (created).
func newServer(dir, data, jar string) (*Server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	if err := os.Mkdir(data, 0o755); err != nil {
		return nil, err
	}
	conf, err := writeConfig(dir, addr, data)
	if err != nil {
		return nil, err
	}
	return &Server{Endpoint: "http://" + addr, log: new(testutil.SyncBuffer), jar: jar, conf: conf, addr: addr}, nil
}

// start runs the server and waits until it listens.
func (s *Server) start(t testing.TB) {
	if err := s.launch(); err != nil {
		t.Fatal(err)
	}
}

// launch runs the server and waits until it listens.
func (s *Server) launch() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	argv := append(append([]string(nil), s.wrap...), "java", "-Xmx512m", "-jar", s.jar, "--properties", s.conf)
	cmd := testutil.DieWithTest(exec.Command(argv[0], argv[1:]...))
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	s.cmd, s.exited = cmd, exited
	deadline := time.Now().Add(60 * time.Second)
	for {
		if s.wrap == nil {
			if c, err := net.Dial("tcp", s.addr); err == nil {
				c.Close()
				return nil
			}
		} else if strings.Contains(s.log.String(), "Started Server@") {
			return nil
		}
		select {
		case err := <-exited:
			s.cmd = nil
			return fmt.Errorf("s3proxy exited at start (%v):\n%s", err, s.log)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("s3proxy did not listen on %s within 60 s:\n%s", s.addr, s.log)
		}
	}
}

// stop kills the server and waits for it.
func (s *Server) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		s.cmd.Process.Kill()
		<-s.exited
		s.cmd = nil
	}
}

// Restart kills the server and starts it again on the same port with the
// same objects (what a store's restart looks like to a reader: refused
// connections, then the same bytes).
func (s *Server) Restart(t testing.TB) {
	s.stop()
	s.start(t)
}

// Env points the AWS configuration of this process at endpoint with the
// server's keys.
func (s *Server) Env(t testing.TB, endpoint string) {
	t.Setenv("AWS_ENDPOINT_URL", endpoint)
	t.Setenv("AWS_ACCESS_KEY_ID", AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", SecretKey)
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// Upload creates bucket (when absent) and copies the files of folder dir
// under prefix, returning s3://bucket/prefix.
func (s *Server) Upload(t testing.TB, bucket, prefix, dir string) string {
	t.Helper()
	ctx := context.Background()
	st, err := objstore.NewS3(ctx, bucket, prefix, objstore.S3Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := st.Client()
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &bucket}); err != nil {
		if _, herr := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &bucket}); herr != nil {
			t.Fatalf("create bucket %s: %v", bucket, err)
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		s.Put(t, st, e.Name(), filepath.Join(dir, e.Name()))
	}
	return st.Location()
}

// Put writes local file path as name of st.
func (s *Server) Put(t testing.TB, st *objstore.S3, name, path string) {
	t.Helper()
	if _, err := st.PutFile(context.Background(), name, path); err != nil {
		t.Fatal(err)
	}
}

// PutDamaged writes file name of local folder dir as name of st with the
// byte at fraction at of it (0.5: the middle) XORed with flip: the same
// size, other bytes, as an object overwritten under a reader.
func (s *Server) PutDamaged(t testing.TB, st *objstore.S3, dir, name string, at float64, flip byte) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	data[int(float64(len(data))*at)] ^= flip
	bad := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(bad, data, 0o644); err != nil {
		t.Fatal(err)
	}
	s.Put(t, st, name, bad)
}

// Pid is the server's process id (the JVM's, or the namespace wrapper's
// that became it).
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd.Process.Pid
}

// Age sets the Last-Modified time of object key of bucket to age ago (the
// filesystem backend's file time), as an upload that ran long ago left it.
func (s *Server) Age(t testing.TB, bucket, key string, age time.Duration) {
	t.Helper()
	path := filepath.Join(filepath.Dir(s.conf), "data", bucket, filepath.FromSlash(key))
	when := time.Now().Add(-age)
	if err := os.Chtimes(path, when, when); err != nil {
		t.Fatal(err)
	}
}
