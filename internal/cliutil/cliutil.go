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
	"regexp"
	"strings"
	"sync"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/augloader/augloader/internal/bytesize"
)

var (
	atExitMu sync.Mutex
	atExit   = map[int]func(){}
	atExitN  int
)

// AtExit has f run if a second signal ends the process at once (Main),
// where deferred calls do not run: a command removes its temporary files
// so. The returned func drops f (call it when the files are gone anyway).
func AtExit(f func()) (drop func()) {
	atExitMu.Lock()
	defer atExitMu.Unlock()
	atExitN++
	n := atExitN
	atExit[n] = f
	return func() {
		atExitMu.Lock()
		defer atExitMu.Unlock()
		delete(atExit, n)
	}
}

func runAtExit() {
	atExitMu.Lock()
	defer atExitMu.Unlock()
	for _, f := range atExit {
		f()
	}
}

// Main runs app on os.Args, flags allowed after positionals. The first
// SIGINT or SIGTERM cancels the context commands run with (they shut down
// cleanly); a second one exits at once with status 130. An error is
// printed as "NAME: error" with exit status 1, or the cli.ExitCoder's; a
// usage error (Usage) and an unknown command exit with status 2.
func Main(app *cli.App) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		cancel()
		<-sigs
		fmt.Fprintf(os.Stderr, "%s: second signal: exiting now\n", app.Name)
		runAtExit()
		os.Exit(130)
	}()
	app.ExitErrHandler = func(*cli.Context, error) {} // Main prints and exits itself
	Usage(app)
	if msg := UnknownCommand(app, os.Args); msg != "" {
		fmt.Fprintln(os.Stderr, msg)
		os.Exit(2)
	}
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

// Float64Range is a Float64Flag Action refusing values outside [lo, hi]
// (and NaN), naming the flag and the range.
func Float64Range(name string, lo, hi float64) func(*cli.Context, float64) error {
	return func(_ *cli.Context, v float64) error {
		if !(v >= lo && v <= hi) {
			return fmt.Errorf("--%s %v: want %g..%g", name, v, lo, hi)
		}
		return nil
	}
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

// HumanSize spells n bytes for a person (12.8MiB: bytesize.Human).
func HumanSize(n int64) string { return bytesize.Human(n) }

// Usage makes every usage error of app and its commands one line that
// leads with the error, suggests the closest flag, and says where the
// help is, exit status 2 (urfave/cli printed its whole help, the error
// above it, scrolled off by 20 lines of flags).
func Usage(app *cli.App) {
	app.OnUsageError = usageError(app.Name, app.Flags)
	var walk func(prefix string, cmds []*cli.Command)
	walk = func(prefix string, cmds []*cli.Command) {
		for _, c := range cmds {
			c.OnUsageError = usageError(prefix+" "+c.Name, c.Flags)
			walk(prefix+" "+c.Name, c.Subcommands)
		}
	}
	walk(app.Name, app.Commands)
}

func usageError(name string, flags []cli.Flag) cli.OnUsageErrorFunc {
	return func(_ *cli.Context, err error, _ bool) error {
		return cli.Exit(UsageMessage(name, err.Error(), flags), 2)
	}
}

// UsageMessage is a usage error as Main prints it: "NAME: error (did
// you mean --x?)" and where the help is. urfave/cli spells flags with one
// dash ("-shard"); the message spells them as they are typed.
func UsageMessage(name, msg string, flags []cli.Flag) string {
	if rest, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		flag := strings.TrimLeft(rest, "-")
		msg = "unknown flag --" + flag
		var names []string
		for _, f := range flags {
			names = append(names, f.Names()...)
		}
		if s := Closest(flag, names); s != "" {
			msg += " (did you mean --" + s + "?)"
		}
	} else {
		known := map[string]bool{}
		for _, f := range flags {
			for _, n := range f.Names() {
				known[n] = true
			}
		}
		msg = flagRef.ReplaceAllStringFunc(msg, func(m string) string {
			if i := strings.Index(m, "-"); known[m[i+1:]] {
				return m[:i] + "-" + m[i:]
			}
			return m
		})
	}
	return fmt.Sprintf("%s: %s\nRun '%s --help' for its flags.", name, msg, name)
}

// flagRef is a flag as urfave/cli's errors spell it: " -name".
var flagRef = regexp.MustCompile(` -[A-Za-z][\w-]*`)

// UnknownCommand is the message for an app run with a command it does
// not have ("" when the command exists, or none was given).
func UnknownCommand(app *cli.App, args []string) string {
	i := 1
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		i++
	}
	if i >= len(args) || app.Command(args[i]) != nil || args[i] == "help" || args[i] == "h" {
		return ""
	}
	var names []string
	for _, c := range app.Commands {
		if !c.Hidden {
			names = append(names, c.Names()...)
		}
	}
	msg := fmt.Sprintf("%s: no command %q", app.Name, args[i])
	if s := Closest(args[i], names); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return msg + fmt.Sprintf("\nRun '%s --help' for its commands.", app.Name)
}

// Closest returns the name nearest to typed: one it is a prefix of, or
// else one within a few edits (about a third of its length, at least 2);
// "" when none is near.
func Closest(typed string, names []string) string {
	best, bestD := "", max(2, len(typed)/3)+1
	for _, n := range names {
		if len(typed) >= 3 && strings.HasPrefix(n, typed) {
			return n
		}
		if d := editDistance(typed, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is Levenshtein's distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
