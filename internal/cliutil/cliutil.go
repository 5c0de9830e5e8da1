// Package cliutil is what augloader's two commands share around
// urfave/cli/v2: flags accepted anywhere on the line (Permute), range
// checks that name the flag (IntRange), and a main that turns SIGINT and
// SIGTERM into a cancelled context (Main).
//
// Flags after positional arguments: urfave/cli v2 stops parsing flags at
// the first positional (`stats DIR --json` fails), and has no switch for
// it; v3 accepts them but changes every command's signature. Permute
// reorders the arguments before v2 parses them, which keeps v2 (the
// project's documented dependency) and costs one function.
package cliutil

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/augloader/augloader/internal/bytesize"
)

// Main runs app on os.Args, flags allowed after positionals. The first
// SIGINT or SIGTERM cancels the context commands run with (they shut down
// cleanly); a second one exits at once with status 130. An error is
// printed as "NAME: error" with exit status 1, or the cli.ExitCoder's.
func Main(app *cli.App) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		cancel()
		<-sigs
		fmt.Fprintf(os.Stderr, "%s: second signal: exiting now\n", app.Name)
		os.Exit(130)
	}()
	app.ExitErrHandler = func(*cli.Context, error) {} // Main prints and exits itself
	err := app.RunContext(ctx, Permute(app, os.Args))
	if err == nil {
		return
	}
	code := 1
	if ec, ok := err.(cli.ExitCoder); ok {
		code = ec.ExitCode()
		if msg := ec.Error(); msg != "" {
			fmt.Fprintln(os.Stderr, msg)
		}
		os.Exit(code)
	}
	fmt.Fprintf(os.Stderr, "%s: %v\n", app.Name, err)
	os.Exit(code)
}

// Permute returns args (program name first) with every flag of the chosen
// command moved ahead of its positional arguments, values kept with their
// flags; "--" ends the flags as usual.
func Permute(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	out := []string{args[0]}
	i := 1
	for i < len(args) && strings.HasPrefix(args[i], "-") && args[i] != "--" { // global flags (no values in our apps)
		out = append(out, args[i])
		i++
	}
	if i >= len(args) {
		return args
	}
	cmd := app.Command(args[i])
	if cmd == nil {
		return args
	}
	out = append(out, args[i])
	var flags, pos []string
	rest := args[i+1:]
	for k := 0; k < len(rest); k++ {
		a := rest[k]
		if a == "--" {
			pos = append(pos, rest[k:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !hasValue && takesValue(cmd, name) && k+1 < len(rest) {
			k++
			flags = append(flags, rest[k])
		}
	}
	return append(append(out, flags...), pos...)
}

func takesValue(cmd *cli.Command, name string) bool {
	for _, f := range cmd.Flags {
		for _, n := range f.Names() {
			if n == name {
				if _, isBool := f.(*cli.BoolFlag); isBool {
					return false
				}
				return true
			}
		}
	}
	return false
}

// IntRange is an IntFlag Action refusing values outside [lo, hi], naming
// the flag and the range (hi < lo: no upper bound).
func IntRange(name string, lo, hi int) func(*cli.Context, int) error {
	return func(_ *cli.Context, v int) error { return inRange(name, v, lo, hi) }
}

// Int64Range is IntRange for Int64Flags.
func Int64Range(name string, lo, hi int64) func(*cli.Context, int64) error {
	return func(_ *cli.Context, v int64) error { return inRange(name, v, lo, hi) }
}

func inRange[T int | int64](name string, v, lo, hi T) error {
	if v < lo || (hi >= lo && v > hi) {
		if hi < lo {
			return fmt.Errorf("--%s %d: want an integer ≥ %d", name, v, lo)
		}
		return fmt.Errorf("--%s %d: want %d..%d", name, v, lo, hi)
	}
	return nil
}

// OneOf is a StringFlag Action refusing values outside choices.
func OneOf(name string, choices ...string) func(*cli.Context, string) error {
	return func(_ *cli.Context, v string) error {
		for _, c := range choices {
			if v == c {
				return nil
			}
		}
		return fmt.Errorf("--%s %q: want one of %s", name, v, strings.Join(choices, ", "))
	}
}

// ParseSize reads a byte count (bytesize.Parse), naming the flag when it
// cannot.
func ParseSize(flag, s string) (int64, error) {
	n, err := bytesize.Parse(s)
	if err != nil {
		return 0, fmt.Errorf("--%s %q: want a size such as 512MiB or 2GB (a whole number of bytes)", flag, s)
	}
	return n, nil
}

// FormatSize spells n bytes as ParseSize reads it (bytesize.Format).
func FormatSize(n int64) string { return bytesize.Format(n) }
