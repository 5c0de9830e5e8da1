package wire

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
)

// Error codes in an error body (both transports; Flight maps them to gRPC
// codes, see docs/protocol.md).
const (
	CodeBadRequest  = "bad_request"  // malformed frame or JSON
	CodeOutOfRange  = "out_of_range" // epoch, rank, batch size, start batch
	CodeUnavailable = "unavailable"  // shutting down, too many streams
	CodeInternal    = "internal"     // augmentation or storage failure
)

// Request is the request body: which batches of which rank's part of which
// epoch, of which of the daemon's views.
type Request struct {
	Epoch     uint64 `json:"epoch"`
	Rank      int    `json:"rank"`
	World     int    `json:"world"`                // 0 means 1
	BatchSize int    `json:"batch_size,omitempty"` // 0: the server's default
	// The batches sent are StartBatch, StartBatch+Stride, … of the rank's
	// epoch, at most Count of them: resume (StartBatch k), one of several
	// daemons or DataLoader workers (Stride s), a chunk (Count). Stride 0
	// means 1; Count 0 means to the end.
	StartBatch int `json:"start_batch,omitempty"`
	Stride     int `json:"stride,omitempty"`
	Count      int `json:"count,omitempty"`
	// BatchesPerEpoch, when set, makes an epoch that many batches drawn
	// from consecutive passes over the served set (each pass a fresh
	// permutation and fresh augmentations): the paper's fixed iterations
	// per epoch. 0: an epoch is one pass.
	BatchesPerEpoch int `json:"batches_per_epoch,omitempty"`
	// DropLast drops each pass's final batch when it is short.
	DropLast bool `json:"drop_last,omitempty"`
	// View names one of the daemon's views ("" for its default one); Fold
	// selects a per-fold view's fold.
	View string `json:"view,omitempty"`
	Fold int    `json:"fold,omitempty"`
	// Digest asks the server for the SHA-256 of the Arrow IPC stream it
	// sent, in the trailer (a Flight client, which does not see the
	// stream's bytes, can check it against another daemon's).
	Digest bool `json:"digest,omitempty"`
	// Shm asks for the shared-memory transport (ShmRing): the request
	// frame carries the client's ring as a file descriptor. Unix socket
	// only.
	Shm bool `json:"shm,omitempty"`
}

// MaxViewName caps a view's name.
const MaxViewName = 64

// Config identifies a stream configuration: every setting that changes
// the bytes a request gets (not the workers, the index or the transport).
// The server echoes it in every response; materialize stores it and
// refuses to mix two; a client reading one epoch from several daemons
// refuses a daemon whose ID differs from the first one's.
type Config struct {
	// ID is the first 16 hex digits of the SHA-256 of the other fields'
	// JSON (WithID): equal IDs, equal configurations.
	ID      string `json:"id"`
	Dataset string `json:"dataset"`
	// ShardsSHA256 is the SHA-256 of the shard folder's manifest.json
	// (which holds every shard's CRC).
	ShardsSHA256 string `json:"shards_sha256"`
	Served       int    `json:"served"` // graphs in the served set
	// ServedSHA256 is the SHA-256 of the served graph ids (int64 LE).
	ServedSHA256 string `json:"served_sha256"`
	Seed         uint64 `json:"seed"`
	Schedule     string `json:"schedule"`   // canonical form (epoch.Schedule.Canonical)
	BatchSize    int    `json:"batch_size"` // the default for requests that give none
	NodeBudget   int    `json:"node_budget"`
	EdgeBudget   int    `json:"edge_budget"`
	Remainder    string `json:"remainder"`
}

// WithID returns c with its ID computed from the other fields.
func (c Config) WithID() Config {
	c.ID = ""
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	c.ID = hex.EncodeToString(sum[:8])
	return c
}

// Response is the body of a successful response frame.
type Response struct {
	Dataset      string `json:"dataset"`
	Epoch        uint64 `json:"epoch"`
	Batches      int    `json:"batches"`       // batches that follow
	TotalBatches int    `json:"total_batches"` // batches of the whole rank slice
	Graphs       int    `json:"graphs"`        // graphs that follow
	// OverBudget lists the batches (indices in the whole rank slice, from
	// the request's start on) made of one graph that may alone exceed the
	// server's node or edge budget.
	OverBudget []int `json:"over_budget,omitempty"`
	// Config identifies what produced the batches.
	Config *Config `json:"config,omitempty"`
}

// Error is the body of an error response or trailer.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"error"`
}

func (e *Error) Error() string { return fmt.Sprintf("server: %s: %s", e.Code, e.Message) }

// Trailer closes a stream (the socket's last frame; Flight's last
// FlightData, metadata only).
type Trailer struct {
	Batches int    `json:"batches"`
	Graphs  int    `json:"graphs"`
	Code    string `json:"code,omitempty"`
	Message string `json:"error,omitempty"`
	// SHA256 is the stream's digest, when the request asked for it.
	SHA256 string `json:"sha256,omitempty"`
}

// ParseRequest reads and validates a request frame: known fields only,
// non-negative values. Range checks against the dataset are the server's.
func ParseRequest(r io.Reader) (Request, error) {
	var req Request
	status, body, err := ReadFrame(r, MagicRequest)
	if err != nil {
		return req, err
	}
	if status != StatusOK {
		return req, fmt.Errorf("%w: request status %d", ErrProtocol, status)
	}
	return DecodeRequest(body)
}

// DecodeRequest checks a request body (the JSON of a request frame, or a
// Flight ticket): at most MaxBody bytes, known fields only, no trailing
// data, non-negative values.
func DecodeRequest(body []byte) (Request, error) {
	var req Request
	if len(body) > MaxBody {
		return req, fmt.Errorf("%w: body of %d bytes exceeds %d", ErrProtocol, len(body), MaxBody)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("%w: request body: %v", ErrProtocol, err)
	}
	if dec.More() {
		return req, fmt.Errorf("%w: trailing data after the request body", ErrProtocol)
	}
	if req.Rank < 0 || req.World < 0 || req.BatchSize < 0 || req.StartBatch < 0 || req.Stride < 0 ||
		req.Count < 0 || req.BatchesPerEpoch < 0 || req.Fold < 0 {
		return req, fmt.Errorf("%w: negative rank, world, batch_size, start_batch, stride, count, batches_per_epoch or fold", ErrProtocol)
	}
	if len(req.View) > MaxViewName {
		return req, fmt.Errorf("%w: view name of %d bytes (at most %d)", ErrProtocol, len(req.View), MaxViewName)
	}
	return req, nil
}
