package wire

import (
	"bytes"
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

// Request is the request body: which rank's part of which epoch.
type Request struct {
	Epoch      uint64 `json:"epoch"`
	Rank       int    `json:"rank"`
	World      int    `json:"world"`                 // 0 means 1
	BatchSize  int    `json:"batch_size,omitempty"`  // 0: the server's default
	StartBatch int    `json:"start_batch,omitempty"` // resume: first batch to send
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
}

// Error is the body of an error response or trailer.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"error"`
}

func (e *Error) Error() string { return fmt.Sprintf("server: %s: %s", e.Code, e.Message) }

// Trailer closes a stream.
type Trailer struct {
	Batches int    `json:"batches"`
	Graphs  int    `json:"graphs"`
	Code    string `json:"code,omitempty"`
	Message string `json:"error,omitempty"`
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
	if req.Rank < 0 || req.World < 0 || req.BatchSize < 0 || req.StartBatch < 0 {
		return req, fmt.Errorf("%w: negative rank, world, batch_size or start_batch", ErrProtocol)
	}
	return req, nil
}
