package objstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/augloader/augloader/shard"
)

// ErrExists is a prefix that already holds a shard folder (its manifest).
var ErrExists = errors.New("objstore: a shard folder is already there")

// partSize is a multipart upload's part: files larger go in parts (a
// variable for the tests).
var partSize int64 = 64 << 20

// ErrSameNames is a replacement whose shard files would overwrite the old
// folder's before its manifest is replaced.
var ErrSameNames = errors.New("objstore: the new folder's shard files have the old folder's names")

// ErrReplaced is a replacement that another one overtook: the manifest in
// the store is neither the one it replaces nor its own. Its files stay
// beside the other's folder, unused (shardconv prune), and nothing of the
// folder in place is deleted.
var ErrReplaced = errors.New("objstore: another replacement swapped its folder in first")

// ErrIncomplete is a new folder whose file is not in the store as
// uploaded just before the swap (deleted meanwhile, by a prune say): the
// manifest is not swapped, so the prefix keeps the folder it had.
var ErrIncomplete = errors.New("objstore: the new folder is not whole in the store")

// ErrSwapped wraps a failure (or a stop) after the swap: the prefix holds
// the new folder, but the files put after the swap (a split) or the old
// folder's deletes may not be done.
var ErrSwapped = errors.New("objstore: the new folder is in place")

// NewGeneration is a fresh folder generation (shard.Manifest.Generation):
// 16 random hex digits.
func NewGeneration() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on the systems Go supports
	}
	return hex.EncodeToString(b[:])
}

// PutFolder copies local shard folder dir under the store's prefix: every
// file but the manifest first (a file larger than 64 MiB by multipart
// upload), the manifest last, so the folder exists for a reader only
// once complete. A prefix that holds a manifest is refused (ErrExists)
// unless replace. A replacement never overwrites the old folder's shards
// or graph-size index: the new folder must have a generation of its own
// (shard.Manifest.Generation, which names its files; ErrSameNames
// otherwise), its files go up beside the old ones, and the manifest's
// one PUT swaps the folders: until then readers see the old folder whole,
// and a replacement that fails or is stopped leaves it as it was. Before
// the swap every new file is asked for (HEAD) and must be there as
// uploaded (ErrIncomplete otherwise). The swap is conditional on the
// manifest it replaces: If-Match its ETag (If-None-Match * where there was
// none), for a store that honours it; and a try that fails is followed by
// a read of the manifest in place before the next, so a PUT applied whose
// answer was lost is seen as done, and one overtaken by another
// replacement is not made again (ErrReplaced). Only then, the manifest
// read once more and still this folder's, are the old folder's shards,
// index and listed files deleted (running readers of it fail naming the
// object that went). The files the manifest lists beside the shards (a
// split) carry the generation too and go up before the swap, so the
// folder and its split change together; files it does not list go up
// after. progress, when set, is told each file done.
func (s *S3) PutFolder(ctx context.Context, dir string, replace bool, progress func(name string, bytes int64)) error {
	exists, err := s.Vacant(ctx, replace)
	if err != nil {
		return err
	}
	var stale []string
	var before manifestSeen
	man, err := shard.ReadManifest(dir)
	if err != nil {
		return err
	}
	if exists {
		if before, err = s.manifestNow(ctx); err != nil {
			return err
		}
		if stale, err = s.replaced(man, before.body); err != nil {
			return err
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range ents {
		if e.Type().IsRegular() && e.Name() != shard.ManifestName {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	// A replacement puts the files its manifest names (shards, index, the
	// splits it lists) before the swap: they carry its generation, so they
	// overwrite nothing of the old folder's, and the folder and its split
	// change together. Files it does not name (the user's own) go up after.
	var after []string
	if exists {
		mine := map[string]bool{man.GraphSizesFile(): true}
		for i := range man.Shards {
			mine[man.ShardFile(i)] = true
		}
		for _, f := range man.Files {
			mine[man.StoredName(f.Name)] = true
		}
		var own []string
		for _, name := range names {
			if mine[name] {
				own = append(own, name)
			} else {
				after = append(after, name)
			}
		}
		names = own
	}
	sizes := map[string]int64{}
	for _, name := range names {
		n, err := s.PutFile(ctx, name, filepath.Join(dir, name))
		if err != nil {
			return err
		}
		sizes[name] = n
		if progress != nil {
			progress(name, n)
		}
	}
	for _, name := range names {
		f, err := s.Open(ctx, name)
		if err != nil {
			return fmt.Errorf("%w: %s/%s, uploaded, is gone (%v): the manifest was not swapped, so %s keeps the folder it had",
				ErrIncomplete, s.Location(), name, err, s.Location())
		}
		if f.Size() != sizes[name] {
			return fmt.Errorf("%w: %s/%s holds %d bytes, %d uploaded: the manifest was not swapped", ErrIncomplete, s.Location(), name, f.Size(), sizes[name])
		}
	}
	ours, err := os.ReadFile(filepath.Join(dir, shard.ManifestName))
	if err != nil {
		return err
	}
	if err := s.swapManifest(ctx, ours, before); err != nil {
		return err
	}
	if progress != nil {
		progress(shard.ManifestName, int64(len(ours)))
	}
	for _, name := range after {
		n, err := s.PutFile(ctx, name, filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("%w: %s holds the new folder, but %s, a file it does not list, was not put: %w", ErrSwapped, s.Location(), name, err)
		}
		if progress != nil {
			progress(name, n)
		}
	}
	if len(stale) > 0 {
		// The old folder's files go only while this folder is the one in
		// place: one that overtook this replacement may use them.
		now, err := s.manifestNow(ctx)
		if err != nil {
			return fmt.Errorf("%w: %s: the old folder's files kept (the manifest could not be read again: %w)", ErrSwapped, s.Location(), err)
		}
		if now.digest != digestOf(ours) {
			return fmt.Errorf("%w: %s holds another folder than this one since the swap; the old files are kept", ErrReplaced, s.Location())
		}
	}
	for _, name := range stale {
		if err := s.Delete(ctx, name); err != nil {
			return fmt.Errorf("%w: %s now holds the new folder; the old one's files: %w", ErrSwapped, s.Location(), err)
		}
	}
	return nil
}

// manifestSeen is the manifest in the store when a replacement began: its
// ETag, the SHA-256 of its bytes ("" for none there) and the bytes.
type manifestSeen struct {
	etag, digest string
	body         []byte
}

// manifestNow reads the manifest in place (none: the zero manifestSeen).
func (s *S3) manifestNow(ctx context.Context) (manifestSeen, error) {
	key := s.Key(shard.ManifestName)
	var seen manifestSeen
	err := s.retry(ctx, func(ctx context.Context) error {
		out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &key})
		if err != nil {
			return err
		}
		defer out.Body.Close()
		b, err := io.ReadAll(io.LimitReader(out.Body, shard.MaxManifestBytes+1))
		if err != nil {
			return errRetry{err}
		}
		seen = manifestSeen{etag: aws.ToString(out.ETag), digest: digestOf(b), body: b}
		return nil
	}, func(err error) error { return fmt.Errorf("objstore: reading s3://%s/%s: %w", s.bucket, key, err) })
	if errors.Is(err, os.ErrNotExist) {
		return manifestSeen{}, nil
	}
	return seen, err
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// swapManifest puts manifest bytes ours in place of the one seen before
// (none: before is zero), conditionally (If-Match, If-None-Match) for a
// store that honours it; after a try that fails, the manifest in place
// decides: ours (the PUT was applied, its answer lost) is done; the one
// replaced is tried again; another is ErrReplaced, never overwritten.
func (s *S3) swapManifest(ctx context.Context, ours []byte, before manifestSeen) error {
	key := s.Key(shard.ManifestName)
	in := func() *s3.PutObjectInput {
		in := &s3.PutObjectInput{Bucket: &s.bucket, Key: &key, Body: bytes.NewReader(ours), ContentLength: aws.Int64(int64(len(ours)))}
		if before.etag != "" {
			in.IfMatch = aws.String(before.etag)
		} else {
			in.IfNoneMatch = aws.String("*")
		}
		return in
	}
	wait := s.opts.Backoff
	var last error
	conditional := true
	for attempt := 1; attempt <= s.opts.Attempts; attempt++ {
		put := in()
		if !conditional {
			put.IfMatch, put.IfNoneMatch = nil, nil
		}
		actx, cancel := context.WithTimeout(ctx, s.opts.AttemptTimeout)
		_, err := s.client.PutObject(actx, put)
		cancel()
		if err == nil {
			return nil
		}
		last = classify(err)
		if ctx.Err() != nil {
			return s.stoppedInSwap(ctx, ours, last)
		}
		notImplemented := conditional && strings.Contains(last.Error(), "NotImplemented")
		if !notImplemented && !errors.As(last, new(errRetry)) && !errors.Is(last, ErrChanged) {
			return fmt.Errorf("objstore: swapping in s3://%s/%s: %w", s.bucket, key, last)
		}
		now, err := s.manifestNow(ctx)
		switch {
		case err != nil:
			return fmt.Errorf("objstore: swapping in s3://%s/%s: %v; then reading it: %w", s.bucket, key, last, err)
		case now.digest == digestOf(ours):
			return nil // applied; the answer was lost
		case now.digest != before.digest:
			return fmt.Errorf("%w: s3://%s/%s is another folder's since this replacement began (the swap's answer: %v); "+
				"this one's files stay beside it, unused (shardconv prune deletes them)", ErrReplaced, s.bucket, key, last)
		}
		if notImplemented {
			// A store that does not take conditional writes: the read just
			// made guards the unconditional PUT alone (the manifest in place
			// is still the one this replacement began from).
			conditional = false
			continue
		}
		s.stats.Retries.Add(1)
		select {
		case <-time.After(time.Duration(mrand.Int64N(int64(wait)) + 1)):
		case <-ctx.Done():
			return ctx.Err()
		}
		wait = min(2*wait, 5*time.Second)
	}
	return fmt.Errorf("objstore: swapping in s3://%s/%s: %w after %d attempts: %v", s.bucket, key, ErrRead, s.opts.Attempts, last)
}

// ErrSwapUnknown is a replacement stopped while its manifest's PUT was
// under way, whose outcome a last read could not learn: the prefix holds
// the old folder or the new one, whole either way.
var ErrSwapUnknown = errors.New("objstore: stopped during the swap; which folder is in place is unknown")

// stoppedInSwap says what a stop during the manifest's PUT (ctx done, the
// PUT's answer err) left: the PUT may have been applied though its answer
// was not read, so the manifest is read once more, past ctx and briefly,
// and a message that claims the old folder is in place is never made on a
// guess.
func (s *S3) stoppedInSwap(ctx context.Context, ours []byte, err error) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	now, rerr := s.manifestNow(rctx)
	switch {
	case rerr != nil:
		return fmt.Errorf("%w: %s (the swap: %v; reading the manifest again: %v)", ErrSwapUnknown, s.Location(), err, rerr)
	case now.digest == digestOf(ours):
		return fmt.Errorf("%w: %s: stopped after the swap, before the old folder's files were deleted: %w", ErrSwapped, s.Location(), ctx.Err())
	}
	return fmt.Errorf("objstore: %s: stopped before the swap: %w", s.Location(), ctx.Err())
}

// replaced checks that the folder of manifest man may go up beside the one
// in the store, whose manifest's bytes are oldBody (read once, for the swap
// too), and returns the old folder's files that the new one does
// not reuse: its shards and graph-size index. An old manifest that cannot
// be read leaves nothing to delete, but its files' names are still
// unknown, so the new folder must then have a generation.
func (s *S3) replaced(man *shard.Manifest, oldBody []byte) ([]string, error) {
	old, err := shard.ParseManifest(oldBody)
	if err != nil {
		if man.Generation == "" {
			return nil, fmt.Errorf("%w: %s holds a folder whose manifest cannot be read (%v): replace it with a folder that has a generation (shardconv convert -o %s --force gives one)",
				ErrSameNames, s.Location(), err, s.Location())
		}
		return nil, nil
	}
	if man.Generation == old.Generation {
		return nil, fmt.Errorf("%w: %s (generation %q): shardconv convert -o %s --force gives the new folder a generation of its own",
			ErrSameNames, s.Location(), old.Generation, s.Location())
	}
	stale := []string{old.GraphSizesFile()}
	for i := range old.Shards {
		stale = append(stale, old.ShardFile(i))
	}
	for _, f := range old.Files {
		stale = append(stale, old.StoredName(f.Name)) // the generations differ, so do the names
	}
	return stale, nil
}

// Vacant asks whether the prefix may take a folder: one already there
// (its manifest) is ErrExists unless replace, when exists says so; any
// other failure to ask is returned as is.
func (s *S3) Vacant(ctx context.Context, replace bool) (exists bool, err error) {
	// The bucket first: a missing one, or keys it refuses, answer a HEAD of
	// the manifest as 404 or 403 alike.
	err = s.retry(ctx, func(ctx context.Context) error {
		_, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &s.bucket})
		return err
	}, func(err error) error {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("objstore: s3://%s: no such bucket (create it first, or check AWS_ENDPOINT_URL and AWS_REGION)", s.bucket)
		}
		return fmt.Errorf("objstore: s3://%s: %w (check the keys: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE)", s.bucket, err)
	})
	if err != nil {
		return false, err
	}
	_, err = s.Open(ctx, shard.ManifestName)
	switch {
	case err == nil && !replace:
		return true, fmt.Errorf("%w: %s (--force replaces it)", ErrExists, s.Location())
	case err == nil:
		return true, nil
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	}
	return false, err
}

// PutFile uploads local file path as name: one PUT, or a multipart upload
// past partSize (aborted on failure, so no part lingers).
func (s *S3) PutFile(ctx context.Context, name, path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	key, size := s.Key(name), fi.Size()
	fail := func(err error) (int64, error) {
		return 0, fmt.Errorf("objstore: upload %s to s3://%s/%s: %w", path, s.bucket, key, err)
	}
	if size <= partSize {
		err := s.retry(ctx, func(ctx context.Context) error {
			_, err := s.client.PutObject(ctx, &s3.PutObjectInput{Bucket: &s.bucket, Key: &key,
				Body: io.NewSectionReader(f, 0, size), ContentLength: aws.Int64(size)})
			return err
		}, func(err error) error { return err })
		if err != nil {
			return fail(err)
		}
		return size, nil
	}
	up, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &s.bucket, Key: &key})
	if err != nil {
		return fail(err)
	}
	abort := func(err error) (int64, error) {
		s.client.AbortMultipartUpload(context.WithoutCancel(ctx), &s3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: &key, UploadId: up.UploadId})
		return fail(err)
	}
	var parts []types.CompletedPart
	for off, num := int64(0), int32(1); off < size; off, num = off+partSize, num+1 {
		n := min(partSize, size-off)
		var out *s3.UploadPartOutput
		err := s.retry(ctx, func(ctx context.Context) error {
			var err error
			out, err = s.client.UploadPart(ctx, &s3.UploadPartInput{Bucket: &s.bucket, Key: &key, UploadId: up.UploadId,
				PartNumber: aws.Int32(num), Body: io.NewSectionReader(f, off, n), ContentLength: aws.Int64(n)})
			return err
		}, func(err error) error { return err })
		if err != nil {
			return abort(err)
		}
		parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num)})
	}
	_, err = s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &s.bucket, Key: &key, UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
	if err != nil {
		return abort(err)
	}
	return size, nil
}
