// Package objstore opens shard folders wherever they are kept: a local
// folder, or a prefix of an S3-compatible bucket (s3://BUCKET/PREFIX),
// read by ranged GETs.
//
// Contract: Resolve maps a location to a shard.Store. The S3 store
// answers a file's size and ETag from one HEAD and reads ranges with
// GETs that name that ETag (If-Match), so an object replaced under a
// running reader is refused (ErrChanged, naming the object and range),
// never mixed with the old one's bytes; every page read is checked
// against the CRC-32C the manifest seals in any case. A GET that fails
// for a reason worth trying again (a connection reset, mid-body too, a
// timeout, 5xx, SlowDown, throttling) is tried again with jittered
// exponential backoff, resuming the range from the byte reached, at most
// Attempts times (AUGLOADER_S3_ATTEMPTS, else 10); then the error names
// the object, the range and the last status. A try that receives no byte
// for IdleTimeout is abandoned and tried again, a request ends after
// RequestTimeout, and Close ends every request (ErrClosed), so no read
// outlives the daemon. A ranged GET answered with other bytes than the
// range asked (a 200, another Content-Range) is refused, and so is any
// redirect (ErrAnswer). An object is a shard.Rereader: bytes that failed
// the reader's check are worth one more GET.
//
// Configuration is the AWS SDK's, read the way the AWS CLI reads it:
// AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN,
// AWS_PROFILE with ~/.aws/config and ~/.aws/credentials, AWS_REGION,
// web identity (AWS_WEB_IDENTITY_TOKEN_FILE, AWS_ROLE_ARN), the instance
// role, and AWS_ENDPOINT_URL (or AWS_ENDPOINT_URL_S3) for a store that is
// not AWS, addressed path-style by default (AUGLOADER_S3_VIRTUAL_HOSTED=1
// for virtual-hosted names). Credentials are refreshed by the SDK before
// they expire and never printed.
//
// Writing: PutFolder uploads a local shard folder, the manifest last, so
// a prefix holds a folder only once it is whole; a replacement puts the
// new folder (which has a generation of its own, shard.Manifest.Generation)
// beside the old one, checks that each is there, and swaps the manifest
// (conditionally on the one it replaces, and never over another
// replacement's: ErrReplaced), so the old folder stays whole until then
// and a stopped replacement leaves it as it was, its files beside it
// until Leftovers lists them and Delete takes them (shardconv prune).
//
// Caching: DiskCache keeps another store's reads in a local folder, across
// restarts, keyed by object, version (the ETag) and range, each entry
// checked by its own CRC-32C on every read, at most a byte limit held.
package objstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/augloader/augloader/shard"
)

// ErrScheme is a location with a scheme no store serves.
var ErrScheme = errors.New("objstore: unsupported location")

// Resolve returns the store of location: an S3-compatible prefix for
// s3://BUCKET[/PREFIX], a local folder for a path.
func Resolve(ctx context.Context, location string) (shard.Store, error) {
	scheme, rest, ok := strings.Cut(location, "://")
	if !ok || strings.ContainsAny(scheme, "/.") {
		return shard.DirStore(location), nil
	}
	switch scheme {
	case "s3":
		bucket, prefix, _ := strings.Cut(rest, "/")
		if bucket == "" {
			return nil, fmt.Errorf("%w: %s: no bucket (s3://BUCKET/PREFIX)", ErrScheme, location)
		}
		return NewS3(ctx, bucket, strings.Trim(prefix, "/"), S3Options{})
	}
	return nil, fmt.Errorf("%w: %s: a local folder or s3://BUCKET/PREFIX (S3, or a store that speaks its API through AWS_ENDPOINT_URL)", ErrScheme, location)
}

// IsRemote reports whether location names object storage, not a local
// path.
func IsRemote(location string) bool {
	scheme, _, ok := strings.Cut(location, "://")
	return ok && !strings.ContainsAny(scheme, "/.")
}
