package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/augloader/augloader/internal/cliutil"
	"github.com/augloader/augloader/objstore"
)

// pruneCmd deletes what stopped replacements left in object storage.
func pruneCmd() *cli.Command {
	return &cli.Command{
		Name:      "prune",
		Usage:     "delete the files a stopped `convert -o s3://… --force` left beside a folder in object storage",
		ArgsUsage: "s3://BUCKET/PREFIX",
		Description: "A replacement uploads the new folder's shards and graph-size index beside the old ones, under names that carry its\n" +
			"generation, and swaps the manifest last; one stopped before the swap leaves them there, unused. prune lists the shards and\n" +
			"indexes of any generation but the manifest's and deletes those last modified at least --older-than ago (a replacement\n" +
			"still uploading writes newer ones; a generation is judged by its newest file, so an upload longer than --older-than keeps\n" +
			"its early files). It never touches the manifest's own files, a split file, or files of other names.",
		Flags: []cli.Flag{
			&cli.DurationFlag{Name: "older-than", Value: time.Hour, Usage: "delete only files last modified this long ago or more (0s: all; keep it above the longest upload that may be running)"},
			&cli.BoolFlag{Name: "dry-run", Usage: "list what would be deleted, delete nothing"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return errors.New("prune: want exactly one folder, s3://BUCKET/PREFIX")
			}
			loc := c.Args().First()
			if !objstore.IsRemote(loc) {
				return fmt.Errorf("prune: %s is a local folder: convert replaces one by a rename and removes what a stopped run left, so there is nothing to prune", loc)
			}
			st, err := objstore.Resolve(c.Context, loc)
			if err != nil {
				return err
			}
			s3, ok := st.(*objstore.S3)
			if !ok {
				return fmt.Errorf("prune: %s: not an object store", loc)
			}
			left, err := s3.Leftovers(c.Context)
			if err != nil {
				return err
			}
			minAge := c.Duration("older-than")
			// A generation is judged by its newest file: an upload that runs
			// longer than --older-than keeps its early files while it writes.
			newest := map[string]time.Time{}
			for _, l := range left {
				if l.Modified.After(newest[l.Generation]) {
					newest[l.Generation] = l.Modified
				}
			}
			var deleted, kept int
			var bytes int64
			for _, l := range left {
				age := time.Since(l.Modified).Round(time.Second)
				gen := l.Generation
				if gen == "" {
					gen = "none, a replaced first upload's"
				}
				if young := time.Since(newest[l.Generation]).Round(time.Second); young < minAge {
					kept++
					fmt.Fprintf(os.Stderr, "kept %s (generation %s, modified %s ago): its generation's newest file is %s old, under --older-than %s\n",
						l.Name, gen, age, young, minAge)
					continue
				}
				verb := "would delete"
				if !c.Bool("dry-run") {
					if err := s3.Delete(c.Context, l.Name); err != nil {
						return err
					}
					verb = "deleted"
				}
				deleted++
				bytes += l.Bytes
				fmt.Fprintf(os.Stderr, "%s %s (generation %s, %s, modified %s ago)\n", verb, l.Name, gen, cliutil.FormatSize(l.Bytes), age)
			}
			verb := "deleted"
			if c.Bool("dry-run") {
				verb = "to delete (--dry-run: none deleted)"
			}
			fmt.Fprintf(os.Stderr, "%s: %d files of stopped replacements %s, %s; %d newer kept\n", loc, deleted, verb, cliutil.FormatSize(bytes), kept)
			return nil
		},
	}
}
