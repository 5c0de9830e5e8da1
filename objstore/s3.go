package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"

	"github.com/augloader/augloader/shard"
)

// ErrChanged is an object that changed (another ETag) after it was
// opened: its bytes are never mixed with the ones read before.
var ErrChanged = errors.New("objstore: object changed while read")

// ErrRead is a ranged read that failed after every attempt, or ran past
// its time.
var ErrRead = errors.New("objstore: read failed")

// ErrAnswer is an answer no S3 store gives: a ranged GET answered with
// other bytes than the range asked (a 200 with the whole object, another
// Content-Range), or a redirect (S3 never sends one a client must follow;
// following it would send the request's signature elsewhere).
var ErrAnswer = errors.New("objstore: the store's answer is not S3's")

// ErrClosed is a read of a store that was closed (the daemon shutting
// down): no read outlives it.
var ErrClosed = errors.New("objstore: store closed")

// S3Options tunes an S3 store; zero values take the defaults.
type S3Options struct {
	// Attempts bounds the tries of one request (default
	// AUGLOADER_S3_ATTEMPTS, else 10: with the backoff's doubling, about
	// 20 s of waiting at most, 10 s on average).
	Attempts int
	// AttemptTimeout bounds one try, its body read included (default 60 s).
	AttemptTimeout time.Duration
	// IdleTimeout ends a try that receives no byte for this long, headers
	// or body (default AUGLOADER_S3_IDLE_TIMEOUT, else 15 s): a store that
	// stalls is tried again soon, not after AttemptTimeout.
	IdleTimeout time.Duration
	// RequestTimeout bounds one request over all its tries and waits
	// (default AUGLOADER_S3_REQUEST_TIMEOUT, else 2 minutes): the longest
	// a read waits for a store that answers nothing, before its error.
	RequestTimeout time.Duration
	// Backoff is the first wait before a retry, doubled each time up to
	// 5 s, each wait drawn uniformly up to it (default 100 ms).
	Backoff time.Duration
}

// S3 is a shard folder under a prefix of an S3-compatible bucket.
type S3 struct {
	client         *s3.Client
	bucket, prefix string
	opts           S3Options
	stats          Stats
	// life is cancelled by Close: every request made after, or still
	// running then, ends with ErrClosed.
	life  context.Context
	close context.CancelFunc
}

// Stats counts an S3 store's requests (read while it serves).
type Stats struct {
	Gets, Heads, Retries, Bytes atomic.Int64
	// Nanos sums the time from each GET sent to its body read.
	Nanos atomic.Int64
}

// NewS3 opens the folder at s3://bucket/prefix with the AWS SDK's
// default configuration (the package doc lists what it reads).
func NewS3(ctx context.Context, bucket, prefix string, o S3Options) (*S3, error) {
	if o.Attempts <= 0 {
		o.Attempts = 10
		if n, err := strconv.Atoi(os.Getenv("AUGLOADER_S3_ATTEMPTS")); err == nil && n > 0 {
			o.Attempts = n
		}
	}
	if o.AttemptTimeout <= 0 {
		o.AttemptTimeout = 60 * time.Second
	}
	if o.Backoff <= 0 {
		o.Backoff = 100 * time.Millisecond
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = envDuration("AUGLOADER_S3_IDLE_TIMEOUT", 15*time.Second)
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = envDuration("AUGLOADER_S3_REQUEST_TIMEOUT", 2*time.Minute)
	}
	// Retries are this package's (it resumes a body cut midway, and counts
	// them); the SDK's own would multiply the attempts.
	// The SDK's own log (an instance-metadata fallback, say) stays quiet:
	// what fails comes back as an error naming the object.
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRetryer(func() aws.Retryer { return aws.NopRetryer{} }),
		config.WithLogger(logging.Nop{}))
	if err != nil {
		return nil, fmt.Errorf("objstore: s3://%s/%s: AWS configuration: %w", bucket, prefix, err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1" // what S3-compatible stores sign with
	}
	client := s3.NewFromConfig(cfg, func(so *s3.Options) {
		// A custom endpoint (AWS_ENDPOINT_URL) is a store that is not
		// AWS: most take bucket names in the path, not the host.
		so.UsePathStyle = so.BaseEndpoint != nil && os.Getenv("AUGLOADER_S3_VIRTUAL_HOSTED") != "1"
		// Ask for checksums only where the API needs them: stores that
		// speak S3 do not all accept the SDK's trailing ones.
		so.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		so.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		so.HTTPClient = noRedirects(so.HTTPClient)
	})
	life, closeFn := context.WithCancelCause(context.WithoutCancel(ctx))
	return &S3{client: client, bucket: bucket, prefix: prefix, opts: o, life: life,
		close: func() { closeFn(ErrClosed) }}, nil
}

// noRedirects is the SDK's HTTP client (its transport, as the AWS
// configuration set it: AWS_CA_BUNDLE, proxies) that follows no redirect:
// S3 never needs one, and Go's client would send the request's
// Authorization to another port of the same host.
func noRedirects(c s3.HTTPClient) s3.HTTPClient {
	b, ok := c.(*awshttp.BuildableClient)
	if !ok {
		b = awshttp.NewBuildableClient()
	}
	return &http.Client{
		Transport: b.GetTransport(),
		Timeout:   b.GetTimeout(),
		CheckRedirect: func(req *http.Request, _ []*http.Request) error {
			return fmt.Errorf("%w: a redirect to %s, not followed (S3 never redirects a signed request a client must follow; "+
				"AWS_ENDPOINT_URL and AWS_REGION name the store's own endpoint)", ErrAnswer, req.URL.Redacted())
		},
	}
}

// Close ends every request running and refuses later ones (ErrClosed):
// a daemon closes its store when it stops, so no read outlives it.
func (s *S3) Close() error {
	s.close()
	return nil
}

// envDuration is environment variable name as a duration (Go's syntax,
// or seconds), else def.
func envDuration(name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return d
	}
	if n, err := strconv.ParseFloat(v, 64); err == nil && n > 0 {
		return time.Duration(n * float64(time.Second))
	}
	return def
}

// Client is the store's S3 client (for writing a folder, and tests).
func (s *S3) Client() *s3.Client { return s.client }

// Stats returns the store's counters.
func (s *S3) Stats() *Stats { return &s.stats }

// Location is s3://BUCKET/PREFIX.
func (s *S3) Location() string { return "s3://" + s.bucket + "/" + s.prefix }

// Key is the object key of file name.
func (s *S3) Key(name string) string {
	if s.prefix == "" {
		return name
	}
	return s.prefix + "/" + name
}

// Open asks the object's size and ETag (one HEAD).
func (s *S3) Open(ctx context.Context, name string) (shard.StoreFile, error) {
	key := s.Key(name)
	var out *s3.HeadObjectOutput
	ctx, stop := s.within(ctx)
	defer stop()
	err := s.retry(ctx, func(ctx context.Context) error {
		s.stats.Heads.Add(1)
		idle := newIdle(ctx, s.opts.IdleTimeout)
		defer idle.stop()
		var err error
		out, err = s.client.HeadObject(idle.ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: &key})
		return idle.why(err)
	}, func(err error) error {
		return fmt.Errorf("objstore: s3://%s/%s: %w", s.bucket, key, err)
	})
	if err != nil {
		return nil, err
	}
	o := &object{s: s, key: key, size: aws.ToInt64(out.ContentLength), etag: aws.ToString(out.ETag)}
	if t := out.LastModified; t != nil {
		o.modified = t.UnixNano()
	}
	return o, nil
}

// get is the ranged GET of the object as opened: If-Match its ETag, or,
// from a store that gave none, If-Unmodified-Since its Last-Modified
// (an empty If-Match names no version: a store may refuse it, or match
// any). Neither when the HEAD gave neither.
func (o *object) get(rng string) *s3.GetObjectInput {
	in := &s3.GetObjectInput{Bucket: &o.s.bucket, Key: &o.key, Range: &rng}
	switch {
	case o.etag != "":
		in.IfMatch = aws.String(o.etag)
	case o.modified != 0:
		// HTTP dates are whole seconds and Last-Modified is truncated to
		// one: a store that keeps finer times (s3proxy's filesystem) finds
		// the object modified since its own Last-Modified. The next second;
		// a replacement within the one it names is seen by no date.
		in.IfUnmodifiedSince = aws.Time(time.Unix(0, o.modified).Truncate(time.Second).Add(time.Second))
	}
	return in
}

// object is one opened object: reads name the ETag it had when opened.
type object struct {
	s        *S3
	key      string
	size     int64
	etag     string
	modified int64 // Last-Modified, Unix nanoseconds (0: not given)
}

func (o *object) Size() int64  { return o.size }
func (o *object) Close() error { return nil }

// Version is the ETag the object had when opened (the one its reads
// name), or, from a store that gives none (s3proxy's filesystem backend
// for a file put there by hand), its Last-Modified time; "" without
// either, and the object is then not cached.
func (o *object) Version() string {
	switch {
	case o.etag != "":
		return "etag:" + o.etag
	case o.modified != 0:
		return "modified:" + strconv.FormatInt(o.modified, 10)
	}
	return ""
}

// ReadAt reads len(p) bytes at off with ranged GETs, resuming from the
// byte reached when a body is cut; it gives up when ctx ends or the store
// is closed.
func (o *object) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("objstore: s3://%s/%s: negative offset", o.s.bucket, o.key)
	}
	if off >= o.size {
		return 0, io.EOF
	}
	want := min(int64(len(p)), o.size-off)
	got := int64(0)
	ctx, stop := o.s.within(ctx)
	defer stop()
	err := o.s.retry(ctx, func(ctx context.Context) error {
		first, last := off+got, off+want-1
		rng := fmt.Sprintf("bytes=%d-%d", first, last)
		t0 := time.Now()
		o.s.stats.Gets.Add(1)
		idle := newIdle(ctx, o.s.opts.IdleTimeout)
		defer idle.stop()
		out, err := o.s.client.GetObject(idle.ctx, o.get(rng))
		if err != nil {
			return idle.why(err)
		}
		defer out.Body.Close()
		if err := sameRange(out, first, last, o.size); err != nil {
			return err
		}
		n, err := io.ReadFull(idle.reader(out.Body), p[got:want])
		got += int64(n)
		o.s.stats.Bytes.Add(int64(n))
		o.s.stats.Nanos.Add(int64(time.Since(t0)))
		if err != nil {
			// Not wrapped: a cut body is no end of file to the caller.
			return errRetry{fmt.Errorf("body cut at byte %d of %d: %v", got, want, idle.why(err))}
		}
		if tag := aws.ToString(out.ETag); tag != "" && tag != o.etag {
			return fmt.Errorf("%w: ETag %s, %s when opened", ErrChanged, tag, o.etag)
		}
		if t := out.LastModified; o.etag == "" && o.modified != 0 && t != nil && t.UnixNano() != o.modified {
			return fmt.Errorf("%w: modified %s, %s when opened", ErrChanged, t.UTC().Format(time.RFC3339), time.Unix(0, o.modified).UTC().Format(time.RFC3339))
		}
		return nil
	}, func(err error) error {
		return fmt.Errorf("objstore: s3://%s/%s bytes %d-%d: %w", o.s.bucket, o.key, off, off+want-1, err)
	})
	if err != nil {
		return int(got), err
	}
	if want < int64(len(p)) {
		return int(want), io.EOF
	}
	return int(want), nil
}

// sameRange checks that a ranged GET was answered with the range asked:
// a Content-Range of first-last/size and as many bytes (S3 answers 206 so;
// a 200 without it is the whole object, from a store or proxy that
// ignored the Range).
func sameRange(out *s3.GetObjectOutput, first, last, size int64) error {
	want := fmt.Sprintf("bytes %d-%d/%d", first, last, size)
	got := aws.ToString(out.ContentRange)
	if got == "" {
		return fmt.Errorf("%w: asked for %s, answered without a Content-Range (status 200: the whole object, %d bytes; "+
			"a store or proxy that ignores Range requests cannot serve shards)", ErrAnswer, want, aws.ToInt64(out.ContentLength))
	}
	if got != want || aws.ToInt64(out.ContentLength) != last-first+1 {
		return fmt.Errorf("%w: asked for %s, answered %q with %d bytes", ErrAnswer, want, got, aws.ToInt64(out.ContentLength))
	}
	return nil
}

// idle cancels a try that receives no byte for a while: its timer starts
// when the request is sent and restarts at every byte of the body.
type idle struct {
	ctx     context.Context
	cancel  context.CancelCauseFunc
	timer   *time.Timer
	timeout time.Duration
}

// errIdle is a try that received no byte for the idle timeout.
var errIdle = errors.New("no byte received")

func newIdle(ctx context.Context, timeout time.Duration) *idle {
	c, cancel := context.WithCancelCause(ctx)
	i := &idle{ctx: c, cancel: cancel, timeout: timeout}
	i.timer = time.AfterFunc(timeout, func() { cancel(fmt.Errorf("%w for %s", errIdle, timeout)) })
	return i
}

func (i *idle) stop() {
	i.timer.Stop()
	i.cancel(nil)
}

// why names what ended a try: the idle timeout (worth another try), or
// err as it is.
func (i *idle) why(err error) error {
	if cause := context.Cause(i.ctx); errors.Is(cause, errIdle) {
		return errRetry{cause}
	}
	return err
}

// reader restarts the timer at every byte r gives.
func (i *idle) reader(r io.Reader) io.Reader { return idleReader{r, i} }

type idleReader struct {
	r io.Reader
	i *idle
}

func (r idleReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.i.timer.Reset(r.i.timeout)
	}
	return n, err
}

// RereadAt reads a range again (shard.Rereader): bytes that failed the
// reader's check may have been damaged in one transfer, and are worth
// one more GET, counted as a retry.
func (o *object) RereadAt(ctx context.Context, p []byte, off int64) (int, error) {
	o.s.stats.Retries.Add(1)
	return o.ReadAt(ctx, p, off)
}

// errRetry marks an error worth another try.
type errRetry struct{ error }

func (e errRetry) Unwrap() error { return e.error }

// retry runs try until it succeeds, fails for good, or has run Attempts
// times, waiting a jittered, doubling backoff between tries; name wraps
// the final error with what was asked.
//
// The request as a whole ends after RequestTimeout (ErrRead, naming the
// attempts and the last error), and at once when ctx ends or the store is
// closed (ErrClosed).
func (s *S3) retry(ctx context.Context, try func(context.Context) error, name func(error) error) error {
	wait := s.opts.Backoff
	start := time.Now()
	rctx, cancel := context.WithTimeoutCause(ctx, s.opts.RequestTimeout, errRequestTimeout)
	defer cancel()
	// ended names why the request ended early: closed, timed out, or ctx's.
	ended := func(last error) error {
		cause := context.Cause(rctx)
		switch {
		case errors.Is(cause, errRequestTimeout):
			return fmt.Errorf("%w: no answer within %s (AUGLOADER_S3_REQUEST_TIMEOUT), last: %v", ErrRead, time.Since(start).Round(time.Second), last)
		case cause != nil:
			return cause
		}
		return last
	}
	var err, prev error
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(rctx, s.opts.AttemptTimeout)
		err = try(actx)
		cancel()
		if err == nil {
			return nil
		}
		err = classify(err)
		if rctx.Err() != nil {
			if prev != nil {
				err = prev // this try was cut by the end: the one before says why
			}
			return name(ended(err))
		}
		prev = err
		if !errors.As(err, new(errRetry)) {
			return name(err)
		}
		if attempt >= s.opts.Attempts {
			// %v: a cut transport's io.EOF is no end of file to the caller.
			return name(fmt.Errorf("%w after %d attempts: %v", ErrRead, attempt, err))
		}
		s.stats.Retries.Add(1)
		select {
		case <-time.After(time.Duration(rand.Int64N(int64(wait)) + 1)):
		case <-rctx.Done():
			return name(ended(err))
		}
		wait = min(2*wait, 5*time.Second)
	}
}

var errRequestTimeout = errors.New("request timeout")

// within is ctx that also ends when the store is closed.
func (s *S3) within(ctx context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(s.life, func() { cancel(context.Cause(s.life)) })
	return c, func() { stop(); cancel(nil) }
}

// classify names an SDK error: not found (fs.ErrNotExist), changed
// (ErrChanged, on If-Match's 412), worth another try (errRetry: a status
// of 5xx or 429, SlowDown and other throttling, a transport error, a
// timeout), or final (any other status: access denied, a bad request).
func classify(err error) error {
	if errors.As(err, new(errRetry)) || errors.Is(err, ErrChanged) || errors.Is(err, ErrAnswer) || errors.Is(err, ErrClosed) {
		return err
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		code := ""
		var api smithy.APIError
		if errors.As(err, &api) {
			code = api.ErrorCode()
		}
		status := re.HTTPStatusCode()
		switch {
		case status == 0: // no response: the request failed to send
			return errRetry{fmt.Errorf("%v", err)}
		case status == http.StatusNotFound:
			return fmt.Errorf("%w (status 404 %s)", fs.ErrNotExist, code)
		case status == http.StatusPreconditionFailed:
			return fmt.Errorf("%w (status 412 %s)", ErrChanged, code)
		case status >= 500, status == http.StatusTooManyRequests,
			strings.Contains(code, "SlowDown"), strings.Contains(code, "Throttl"), code == "RequestTimeout":
			return errRetry{fmt.Errorf("status %d %s: %w", status, code, err)}
		}
		return fmt.Errorf("status %d %s: %v", status, code, err)
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	// No credentials, or no such host: trying again changes nothing.
	var dns *net.DNSError
	if msg := err.Error(); strings.Contains(msg, "get credentials") || strings.Contains(msg, "failed to retrieve credentials") ||
		errors.As(err, &dns) && dns.IsNotFound {
		return fmt.Errorf("%v (the AWS configuration: AWS_PROFILE or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL for a store that is not AWS)", err)
	}
	// No response: a reset, a refused connection, a timeout.
	return errRetry{fmt.Errorf("%v", err)}
}

// Bucket is the store's bucket.
func (s *S3) Bucket() string { return s.bucket }
