// Package download fetches a TU dataset zip into a cache folder and checks
// it before anyone converts it: written under a temporary name, fsynced,
// renamed; opened as a zip whose entries' CRCs are read through; required
// files present; SHA-256 compared when the caller knows it.
package download

import (
	"archive/zip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/augloader/augloader/internal/iox"
)

// DefaultBaseURL is where the TUDataset collection publishes NAME.zip.
const DefaultBaseURL = "https://www.chrsmrrs.com/graphkerneldatasets"

// MaxZipBytes caps a download (the largest TU zips are a few hundred MB).
const MaxZipBytes = 4 << 30

// Options configure Fetch.
type Options struct {
	Name    string // dataset name, e.g. MUTAG
	BaseURL string // default DefaultBaseURL
	Cache   string // folder for zips (created)
	SHA256  string // expected hex digest; empty: not checked
	Client  *http.Client
	Logger  *slog.Logger
}

var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// Fetch returns the path of Cache/NAME.zip, downloading it when it is not
// there or fails the checks.
func Fetch(ctx context.Context, o Options) (string, error) {
	if !validName.MatchString(o.Name) || strings.Contains(o.Name, "..") {
		return "", fmt.Errorf("download: %q is not a dataset name", o.Name)
	}
	if ogb := strings.ToLower(o.Name); strings.HasPrefix(ogb, "ogbg-") || strings.HasPrefix(ogb, "ogbn-") || strings.HasPrefix(ogb, "ogbl-") {
		// The TU site has no such zip: asking it would fail with a 404
		// that says nothing about why.
		return "", fmt.Errorf("download: %s is an OGB dataset, not a TU one: fetch it with OGB's own loader "+
			"(python -c \"from ogb.graphproppred import PygGraphPropPredDataset as D; D('%s', root='ogb')\"), "+
			"then convert the folder it writes: shardconv convert -i ogb/%s -o %s.shards",
			o.Name, o.Name, strings.ReplaceAll(o.Name, "-", "_"), o.Name)
	}
	if o.BaseURL == "" {
		o.BaseURL = DefaultBaseURL
	}
	if o.Client == nil {
		o.Client = http.DefaultClient
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(o.Cache, 0o755); err != nil {
		return "", fmt.Errorf("download: %w", err)
	}
	dst := filepath.Join(o.Cache, o.Name+".zip")
	if err := Check(dst, o.Name, o.SHA256); err == nil {
		log.Info("using cached zip", "path", dst)
		return dst, nil
	}
	u, err := url.Parse(o.BaseURL)
	if err != nil {
		return "", fmt.Errorf("download: base URL: %w", err)
	}
	u.Path = path.Join(u.Path, o.Name+".zip")
	log.Info("downloading", "url", u.String())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", fmt.Errorf("download: %w", err)
	}
	resp, err := o.Client.Do(req)
	if err != nil {
		return "", fmt.Errorf("download: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("download: %s: HTTP %s", u, resp.Status)
	}
	tmp, err := iox.CreateAtomic(dst, 0o644)
	if err != nil {
		return "", fmt.Errorf("download: %w", err)
	}
	defer tmp.Abort() // a no-op once committed
	n, err := io.Copy(tmp, io.LimitReader(resp.Body, MaxZipBytes+1))
	if err == nil && n > MaxZipBytes {
		err = fmt.Errorf("larger than %d bytes", int64(MaxZipBytes))
	}
	if err == nil {
		err = tmp.Sync()
	}
	if err != nil {
		return "", fmt.Errorf("download: %s: %w", u, err)
	}
	if err := Check(tmp.TempName(), o.Name, o.SHA256); err != nil {
		return "", err
	}
	if err := tmp.Commit(); err != nil {
		return "", fmt.Errorf("download: %w", err)
	}
	log.Info("downloaded", "path", dst, "bytes", n)
	return dst, nil
}

// Check verifies a zip: SHA-256 when want is set, every entry readable with
// a matching CRC, and the required TU files of name present.
func Check(p, name, want string) error {
	if want != "" {
		f, err := iox.OpenRegular(p)
		if err != nil {
			return fmt.Errorf("download: %w", err)
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return fmt.Errorf("download: %w", err)
		}
		if got := hex.EncodeToString(h.Sum(nil)); !strings.EqualFold(got, want) {
			return fmt.Errorf("download: %s: sha256 %s, want %s", p, got, want)
		}
	}
	zr, err := zip.OpenReader(p)
	if err != nil {
		return fmt.Errorf("download: %s: not a zip: %w", p, err)
	}
	defer zr.Close()
	found := map[string]bool{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			return fmt.Errorf("download: %s: entry %s: %w", p, f.Name, err)
		}
		_, err = io.Copy(io.Discard, rc) // the zip reader checks the CRC at EOF
		rc.Close()
		if err != nil {
			return fmt.Errorf("download: %s: entry %s: %w", p, f.Name, err)
		}
		found[path.Base(f.Name)] = true
	}
	for _, s := range []string{"_A.txt", "_graph_indicator.txt", "_graph_labels.txt"} {
		if !found[name+s] {
			return fmt.Errorf("download: %s: no %s%s: not the TU dataset %s", p, name, s, name)
		}
	}
	return nil
}
