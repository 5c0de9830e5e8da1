package wire

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
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
	// Epoch, Rank and World are required: a body without one of them is
	// refused (a `{}` or `null` body was served as epoch 0 of a world of
	// one). World is at least 1.
	Epoch     uint64 `json:"epoch"`
	Rank      int    `json:"rank"`
	World     int    `json:"world"`
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
	// Job names the group of ranks the request's rank belongs to (the
	// Python client sends torchrun's run id, restart count and agent): a
	// daemon refuses a rank of a job that asks for an epoch older than
	// one another rank of that job, view, fold and world already asked
	// (docs/protocol.md, "Epochs of one job"). "": not checked.
	Job string `json:"job,omitempty"`
	// Digest asks the server for the SHA-256 of the Arrow IPC stream it
	// sent, in the trailer (a Flight client, which does not see the
	// stream's bytes, can check it against another daemon's).
	Digest bool `json:"digest,omitempty"`
	// Shm asks for the shared-memory transport (ShmRing): the request
	// frame carries the client's ring as a file descriptor. Unix socket
	// only.
	Shm bool `json:"shm,omitempty"`
	// Resume lists the epoch's earlier phases, oldest first, when it is
	// resumed at another world size (elastic resume): in each, rank r of
	// World ranks received the first Graphs[r] graphs of its slice. This
	// request's rank and world then split the graphs no phase delivered,
	// in the epoch's order (docs/protocol.md, "Resume"). One-pass epochs
	// only (not with BatchesPerEpoch).
	Resume []ResumePhase `json:"resume,omitempty"`
	// Twins, when set (2..MaxTwins), asks for that many differently
	// augmented copies of every graph, index-aligned, each record batch
	// holding its graphs once per twin (docs/protocol.md, "Twins"): the
	// k schedules of one of the twin sets the daemon declares (--twins).
	// 0: the view's own schedule, one copy.
	Twins int `json:"twins,omitempty"`
	// TwinWeights, with Twins, are the relative probabilities of the
	// daemon's twin sets, one a set in the order declared (JOAO's
	// per-epoch distribution); absent: equal.
	TwinWeights []float64 `json:"twin_weights,omitempty"`
}

// ResumePhase is one earlier phase of a resumed epoch: World ranks, rank r
// of which received the first Graphs[r] graphs (padded repeats included)
// of its slice.
type ResumePhase struct {
	World  int   `json:"world"`
	Graphs []int `json:"graphs"`
}

// Resume bounds: the ranks of all phases together, and the phases.
const (
	MaxResumeRanks  = 4096
	MaxResumePhases = 64
)

// Twin bounds: copies of a graph in a request, sets a daemon declares.
const (
	MaxTwins    = 4
	MaxTwinSets = 64
)

// MaxViewName caps a view's name.
const MaxViewName = 64

// MaxJob bounds a request's job name (Request.Job).
const MaxJob = 256

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
	// Balanced: budget batches cut in steps of one batch per rank
	// (loader.Config.Balanced).
	Balanced  bool   `json:"balanced,omitempty"`
	Remainder string `json:"remainder"`
	// WireCompression is the record batch body codec of the transport
	// that sent the stream (absent: none): the decoded batches are the
	// same, their bytes and digests are not, so daemons compressing
	// differently are different configurations to a client reading one
	// epoch from several.
	WireCompression Compression `json:"wire_compression,omitempty"`
	// EdgeFill is what an edge no input edge explains carries, when the
	// daemon was given one (--edge-fill; absent: the default, each
	// categorical column's reserved code and 0 for floats).
	EdgeFill string `json:"edge_fill,omitempty"`
	// Shuffle is the epoch order's draw when not the global permutation
	// ("page-window:N", epoch.Shuffle; absent: global).
	Shuffle string `json:"shuffle,omitempty"`
	// Twins, in a twin stream's identity only, is the daemon's declared
	// twin sets (a JSON list of lists of canonical schedules), and
	// TwinWeights the request's normalised weights over them
	// (comma-separated, shortest form): both change which op a twin gets.
	Twins       string `json:"twins,omitempty"`
	TwinWeights string `json:"twin_weights,omitempty"`
	// Structures, for a structure set only, is the augmentation and the
	// served cutoff ("rotate,noise=0.05;cutoff=5").
	Structures string `json:"structures,omitempty"`
}

// Compression is a stream's record batch body codec (Arrow IPC body
// compression, which every Arrow reader undoes).
type Compression string

// Codecs a transport may compress with.
const (
	CompressNone Compression = ""
	CompressZstd Compression = "zstd"
	CompressLZ4  Compression = "lz4"
)

// Compressions lists the codecs by name (none is "").
func Compressions() []string { return []string{string(CompressZstd), string(CompressLZ4)} }

// ParseCompression accepts "", "none", "zstd" or "lz4".
func ParseCompression(s string) (Compression, error) {
	switch c := Compression(s); c {
	case CompressNone, CompressZstd, CompressLZ4:
		return c, nil
	case "none":
		return CompressNone, nil
	}
	return "", fmt.Errorf("wire: compression %q: want zstd or lz4 (or none)", s)
}

// WithID returns c with its ID computed from the other fields.
func (c Config) WithID() Config {
	c.ID = c.computeID()
	return c
}

func (c Config) computeID() string {
	c.ID = ""
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// Check reports whether ID is the one the other fields give: an identity
// read from a file or a peer whose fields were edited without its ID (a
// hand-forged materialize.json with another seed) is refused.
func (c Config) Check() error {
	if want := c.computeID(); c.ID != want {
		return fmt.Errorf("%w: configuration id %q does not match its fields (they give %s): edited by hand?", ErrProtocol, c.ID, want)
	}
	return nil
}

// Diff names the settings in which other differs from c, one entry per
// field ("seed 11 vs 12": c's, then other's), in field order; none when
// the two are the same configuration. Every comparison of two identities (materialize's
// rerun check, a client reading one epoch from several daemons) goes
// through it, so they name the same fields the same way.
func (c Config) Diff(other Config) []string {
	var d []string
	add := func(name string, a, b any) {
		if a != b {
			d = append(d, fmt.Sprintf("%s %v vs %v", name, a, b))
		}
	}
	add("dataset", c.Dataset, other.Dataset)
	add("shards", short(c.ShardsSHA256), short(other.ShardsSHA256))
	add("served graphs", c.Served, other.Served)
	add("served set", short(c.ServedSHA256), short(other.ServedSHA256))
	add("seed", c.Seed, other.Seed)
	add("schedule", c.Schedule, other.Schedule)
	add("batch size", c.BatchSize, other.BatchSize)
	add("node budget", c.NodeBudget, other.NodeBudget)
	add("edge budget", c.EdgeBudget, other.EdgeBudget)
	add("remainder", c.Remainder, other.Remainder)
	add("wire compression", orNone(c.WireCompression), orNone(other.WireCompression))
	add("edge fill", orDefault(c.EdgeFill), orDefault(other.EdgeFill))
	add("shuffle", orGlobal(c.Shuffle), orGlobal(other.Shuffle))
	add("twins", orAbsent(c.Twins), orAbsent(other.Twins))
	add("twin weights", orAbsent(c.TwinWeights), orAbsent(other.TwinWeights))
	if len(d) == 0 && c.ID != other.ID {
		d = append(d, fmt.Sprintf("id %s vs %s", c.ID, other.ID))
	}
	return d
}

// orAbsent names a setting a plain stream's identity lacks.
func orAbsent(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// orGlobal names the default shuffle.
func orGlobal(s string) string {
	if s == "" {
		return "global"
	}
	return s
}

// orDefault names the default edge fill.
func orDefault(fill string) string {
	if fill == "" {
		return "default"
	}
	return fill
}

// short abbreviates a digest for a message.
func short(digest string) string {
	if len(digest) > 12 {
		return digest[:12] + "…"
	}
	return digest
}

func orNone(c Compression) string {
	if c == CompressNone {
		return "none"
	}
	return string(c)
}

// Response is the body of a successful response frame.
type Response struct {
	Dataset      string `json:"dataset"`
	Epoch        uint64 `json:"epoch"`
	Batches      int    `json:"batches"`       // batches that follow
	TotalBatches int    `json:"total_batches"` // batches of the whole rank slice
	Graphs       int    `json:"graphs"`        // graphs that follow (each Twins times in a twin stream)
	// Twins is the copies of each graph a record batch holds (a twin
	// stream; absent: one).
	Twins int `json:"twins,omitempty"`
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
// Flight ticket): at most MaxBody bytes, a JSON object with epoch, rank
// and world, known fields only, no trailing data, non-negative values,
// world at least 1.
func DecodeRequest(body []byte) (Request, error) {
	var req Request
	if len(body) > MaxBody {
		return req, fmt.Errorf("%w: body of %d bytes exceeds %d", ErrProtocol, len(body), MaxBody)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var present struct {
		Epoch, Rank, World *json.RawMessage
	}
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("%w: request body: %v", ErrProtocol, err)
	}
	if dec.More() {
		return req, fmt.Errorf("%w: trailing data after the request body", ErrProtocol)
	}
	// Required fields: present, not null (a null body decodes to a zero
	// request without error, and a missing key to its zero value).
	if err := json.Unmarshal(body, &present); err != nil || present.Epoch == nil || present.Rank == nil || present.World == nil {
		return req, fmt.Errorf("%w: a request needs epoch, rank and world", ErrProtocol)
	}
	if err := checkNoNulls(body); err != nil {
		return req, err
	}
	if req.Rank < 0 || req.World < 0 || req.BatchSize < 0 || req.StartBatch < 0 || req.Stride < 0 ||
		req.Count < 0 || req.BatchesPerEpoch < 0 || req.Fold < 0 {
		return req, fmt.Errorf("%w: negative rank, world, batch_size, start_batch, stride, count, batches_per_epoch or fold", ErrProtocol)
	}
	if req.World < 1 {
		return req, fmt.Errorf("%w: world %d: a world has at least one rank", ErrProtocol, req.World)
	}
	if len(req.View) > MaxViewName {
		return req, fmt.Errorf("%w: view name of %d bytes (at most %d)", ErrProtocol, len(req.View), MaxViewName)
	}
	if len(req.Job) > MaxJob {
		return req, fmt.Errorf("%w: job name of %d bytes (at most %d)", ErrProtocol, len(req.Job), MaxJob)
	}
	if err := CheckResume(req.Resume); err != nil {
		return req, err
	}
	if err := CheckTwins(req.Twins, req.TwinWeights); err != nil {
		return req, err
	}
	return req, nil
}

// checkNoNulls refuses a null where a request's lists hold numbers: Go
// decodes a JSON null into an int or float64 as 0 without error, so a
// resume count, a phase's world or a twin weight of null would be read as
// 0 (a rank that received nothing, a set never drawn) rather than refused.
func checkNoNulls(body []byte) error {
	var lists struct {
		Resume []struct {
			World  *json.RawMessage   `json:"world"`
			Graphs []*json.RawMessage `json:"graphs"`
		} `json:"resume"`
		TwinWeights []*json.RawMessage `json:"twin_weights"`
	}
	if err := json.Unmarshal(body, &lists); err != nil {
		return fmt.Errorf("%w: request body: %v", ErrProtocol, err)
	}
	null := func(m *json.RawMessage) bool { return m == nil || string(*m) == "null" }
	for i, ph := range lists.Resume {
		if null(ph.World) {
			return fmt.Errorf("%w: resume phase %d: world is null or absent", ErrProtocol, i)
		}
		for r, g := range ph.Graphs {
			if null(g) {
				return fmt.Errorf("%w: resume phase %d: rank %d's graph count is null", ErrProtocol, i, r)
			}
		}
	}
	for i, w := range lists.TwinWeights {
		if null(w) {
			return fmt.Errorf("%w: twin weight %d is null: want a finite non-negative number", ErrProtocol, i)
		}
	}
	return nil
}

// CheckTwins checks a request's twins and twin weights for what needs no
// daemon: twins 0 or 2..MaxTwins; weights only with twins, at most
// MaxTwinSets, each finite and non-negative, at least one positive.
// Errors wrap ErrProtocol.
func CheckTwins(twins int, weights []float64) error {
	switch {
	case twins < 0 || twins == 1 || twins > MaxTwins:
		return fmt.Errorf("%w: twins %d: ask for 2 to %d copies of each graph (0: one, the view's own schedule)", ErrProtocol, twins, MaxTwins)
	case twins == 0 && len(weights) > 0:
		return fmt.Errorf("%w: twin_weights without twins", ErrProtocol)
	case len(weights) > MaxTwinSets:
		return fmt.Errorf("%w: %d twin weights (a daemon declares at most %d twin sets)", ErrProtocol, len(weights), MaxTwinSets)
	}
	positive, sum := false, 0.0
	for i, w := range weights {
		if !(w >= 0) || math.IsInf(w, 0) {
			return fmt.Errorf("%w: twin weight %d is %g: want a finite non-negative number", ErrProtocol, i, w)
		}
		positive = positive || w > 0
		sum += w
	}
	if len(weights) > 0 && !positive {
		return fmt.Errorf("%w: every twin weight is 0: give one set a positive weight", ErrProtocol)
	}
	if math.IsInf(sum, 0) {
		return fmt.Errorf("%w: twin weights %v sum past the largest float: give smaller relative weights", ErrProtocol, weights)
	}
	return nil
}

// CheckResume checks a request's resume phases for what needs no dataset:
// each a world of at least one rank with one non-negative count a rank,
// within MaxResumePhases and MaxResumeRanks. Errors wrap ErrProtocol.
func CheckResume(phases []ResumePhase) error {
	if len(phases) > MaxResumePhases {
		return fmt.Errorf("%w: resume has %d phases (at most %d)", ErrProtocol, len(phases), MaxResumePhases)
	}
	ranks := 0
	for i, ph := range phases {
		if ph.World < 1 {
			return fmt.Errorf("%w: resume phase %d: world %d: a world has at least one rank", ErrProtocol, i, ph.World)
		}
		if len(ph.Graphs) != ph.World {
			return fmt.Errorf("%w: resume phase %d: %d graph counts for a world of %d ranks", ErrProtocol, i, len(ph.Graphs), ph.World)
		}
		if ranks += ph.World; ranks > MaxResumeRanks {
			return fmt.Errorf("%w: resume phases of more than %d ranks together", ErrProtocol, MaxResumeRanks)
		}
		for r, g := range ph.Graphs {
			if g < 0 {
				return fmt.Errorf("%w: resume phase %d: rank %d received %d graphs", ErrProtocol, i, r, g)
			}
		}
	}
	return nil
}
