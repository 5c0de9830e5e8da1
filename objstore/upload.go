package objstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

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
// and a replacement that fails or is stopped leaves it as it was. Only
// then are the old folder's shards and index deleted (running readers of
// it fail naming the object that went); any other file (a split file) is
// overwritten in place before the manifest. progress, when set, is told
// each file done.
func (s *S3) PutFolder(ctx context.Context, dir string, replace bool, progress func(name string, bytes int64)) error {
	exists, err := s.Vacant(ctx, replace)
	if err != nil {
		return err
	}
	var stale []string
	if exists {
		man, err := shard.ReadManifest(dir)
		if err != nil {
			return err
		}
		if stale, err = s.replaced(ctx, man); err != nil {
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
	names = append(names, shard.ManifestName)
	for _, name := range names {
		n, err := s.PutFile(ctx, name, filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if progress != nil {
			progress(name, n)
		}
	}
	for _, name := range stale {
		if err := s.Delete(ctx, name); err != nil {
			return fmt.Errorf("objstore: %s now holds the new folder; the old one's files: %w", s.Location(), err)
		}
	}
	return nil
}

// replaced checks that the folder of manifest man may go up beside the one
// in the store and returns the old folder's files that the new one does
// not reuse: its shards and graph-size index. An old manifest that cannot
// be read leaves nothing to delete, but its files' names are still
// unknown, so the new folder must then have a generation.
func (s *S3) replaced(ctx context.Context, man *shard.Manifest) ([]string, error) {
	old, err := shard.ReadManifestStore(ctx, s)
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
	return stale, nil
}

// Vacant asks whether the prefix may take a folder: one already there
// (its manifest) is ErrExists unless replace, when exists says so; any
// other failure to ask is returned as is.
func (s *S3) Vacant(ctx context.Context, replace bool) (exists bool, err error) {
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
