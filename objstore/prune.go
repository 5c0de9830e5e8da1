package objstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/augloader/augloader/shard"
)

// Leftover is a file under the prefix that no folder uses: a shard or
// graph-size index of another generation than the manifest's, or named
// without one (Generation "") under a manifest that has one.
type Leftover struct {
	Name       string
	Generation string
	Bytes      int64
	Modified   time.Time
}

// generationFile matches the names a folder with a generation gives its
// shards, graph-size index and files beside them (shard.Manifest.ShardFile,
// GraphSizesFile, StoredName of a split): the generation is group 1.
var generationFile = regexp.MustCompile(`^(?:shard-[0-9]{5,}\.([0-9a-f]{16})\.arrow|graph-sizes\.([0-9a-f]{16})\.bin|split-[A-Za-z0-9_.-]+\.([0-9a-f]{16})\.json)$`)

// generationOf is the generation in name, a generation's file's, or "" and
// false for any other name.
func generationOf(name string) (string, bool) {
	m := generationFile.FindStringSubmatch(name)
	if m == nil {
		return "", false
	}
	return m[1] + m[2] + m[3], true
}

// plainFile matches the names a folder without a generation gives its
// shards, graph-size index and splits: a first upload's, which a
// replacement stopped after its swap (or overtaken) leaves beside the new
// folder.
var plainFile = regexp.MustCompile(`^(?:shard-[0-9]{5,}\.arrow|graph-sizes\.bin|split-[A-Za-z0-9_.-]+\.json)$`)

// Leftovers lists the files directly under the prefix that a replacement
// stopped before its manifest's swap left (objstore.S3.PutFolder): shards
// and graph-size indexes named by a generation that is not the manifest's
// (every one when no manifest is there), and those named without a
// generation when the manifest has one (a replaced first upload's, the
// replacement stopped between its swap and its deletes). Split files count
// as the folder's files they are. Other files are never listed: the
// current folder's, what the user keeps there.
func (s *S3) Leftovers(ctx context.Context) ([]Leftover, error) {
	current, manifest := "", false
	man, err := shard.ReadManifestStore(ctx, s)
	switch {
	case err == nil:
		current, manifest = man.Generation, true
	case errors.Is(err, os.ErrNotExist):
	default:
		return nil, fmt.Errorf("objstore: %s: the manifest, which names the files in use: %w", s.Location(), err)
	}
	prefix := s.Key("")
	var out []Leftover
	in := &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &prefix, Delimiter: aws.String("/")}
	for p := s3.NewListObjectsV2Paginator(s.client, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("objstore: listing %s: %w", s.Location(), err)
		}
		for _, o := range page.Contents {
			name := strings.TrimPrefix(aws.ToString(o.Key), prefix)
			gen, ok := generationOf(name)
			if !ok && (!plainFile.MatchString(name) || !manifest || current == "") {
				// Not a folder's file, or the current folder's own (or, with
				// no manifest there, a first upload's under way).
				continue
			}
			if gen == current {
				continue
			}
			out = append(out, Leftover{Name: name, Generation: gen, Bytes: aws.ToInt64(o.Size), Modified: aws.ToTime(o.LastModified)})
		}
	}
	return out, nil
}

// Delete deletes file name of the folder.
func (s *S3) Delete(ctx context.Context, name string) error {
	key := s.Key(name)
	if _, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: &key}); err != nil {
		return fmt.Errorf("objstore: deleting s3://%s/%s: %w", s.bucket, key, err)
	}
	return nil
}
