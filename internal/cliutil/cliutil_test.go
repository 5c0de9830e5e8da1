package cliutil_test

import (
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/augloader/augloader/internal/cliutil"
)

func testApp() *cli.App {
	return &cli.App{Name: "t", Commands: []*cli.Command{
		{Name: "stats", Flags: []cli.Flag{&cli.BoolFlag{Name: "json"}}},
		{Name: "fetch", Flags: []cli.Flag{&cli.StringFlag{Name: "socket", Aliases: []string{"s"}}, &cli.IntFlag{Name: "rank"}, &cli.BoolFlag{Name: "json"}}},
	}}
}

func TestPermute(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"t stats DIR --json", "t stats --json DIR"},
		{"t stats --json DIR", "t stats --json DIR"},
		{"t fetch A --socket /x B --rank -1 --json", "t fetch --socket /x --rank -1 --json A B"},
		{"t fetch A -s /x", "t fetch -s /x A"},
		{"t fetch A --socket=/x", "t fetch --socket=/x A"},
		{"t fetch A -- --json", "t fetch A -- --json"},
		{"t --help", "t --help"},
		{"t unknown A --x", "t unknown A --x"},
		{"t stats DIR -", "t stats DIR -"},
	} {
		got := strings.Join(cliutil.Permute(testApp(), strings.Fields(c.in)), " ")
		if got != c.want {
			t.Errorf("%q: got %q, want %q", c.in, got, c.want)
		}
	}
}

func TestRanges(t *testing.T) {
	if err := cliutil.IntRange("batch-size", 1, 10)(nil, 0); err == nil || err.Error() != "--batch-size 0: want 1..10" {
		t.Errorf("IntRange: %v", err)
	}
	if err := cliutil.IntRange("node-budget", 0, -1)(nil, -1); err == nil || !strings.Contains(err.Error(), "≥ 0") {
		t.Errorf("IntRange open: %v", err)
	}
	if err := cliutil.OneOf("remainder", "pad", "drop")(nil, "keep"); err == nil || !strings.Contains(err.Error(), "pad, drop") {
		t.Errorf("OneOf: %v", err)
	}
	if err := cliutil.IntRange("workers", 1, 8)(nil, 8); err != nil {
		t.Errorf("in range: %v", err)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"1024": 1024, "1GiB": 1 << 30, "512MiB": 512 << 20, "2GB": 2e9, "1.5 kib": 1536, "0": 0} {
		if got, err := cliutil.ParseSize("memory-budget", in); err != nil || got != want {
			t.Errorf("%q: %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "GiB", "-1MiB", "1TB", "lots"} {
		if _, err := cliutil.ParseSize("memory-budget", in); err == nil || !strings.Contains(err.Error(), "--memory-budget") {
			t.Errorf("%q accepted: %v", in, err)
		}
	}
}

// A default spelt by FormatSize reads back as itself.
func TestFormatSize(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{{1 << 30, "1GiB"}, {512 << 20, "512MiB"}, {3 << 10, "3KiB"}, {1000, "1000B"}, {0, "0B"}, {64 << 20, "64MiB"}} {
		got := cliutil.FormatSize(c.n)
		back, err := cliutil.ParseSize("x", got)
		if got != c.want || err != nil || back != c.n {
			t.Errorf("FormatSize(%d) = %q, reads back %d (%v); want %q", c.n, got, back, err, c.want)
		}
	}
}

// A usage error is one line leading with the error, the nearest flag
// suggested, then where the help is; flags spelled as typed (--x).
func TestUsageMessage(t *testing.T) {
	flags := []cli.Flag{&cli.StringFlag{Name: "shards"}, &cli.StringFlag{Name: "socket"}, &cli.IntFlag{Name: "workers"}}
	for _, tc := range []struct{ in, want string }{
		{"flag provided but not defined: -shard", "augloader serve: unknown flag --shard (did you mean --shards?)\nRun 'augloader serve --help' for its flags."},
		{"flag provided but not defined: -sokcet", "augloader serve: unknown flag --sokcet (did you mean --socket?)\n"},
		{"flag provided but not defined: -zzz", "augloader serve: unknown flag --zzz\n"},
		{`invalid value "abc" for flag -workers: parse error`, `augloader serve: invalid value "abc" for flag --workers: parse error` + "\n"},
		{"flag needs an argument: -socket", "augloader serve: flag needs an argument: --socket\n"},
	} {
		if got := cliutil.UsageMessage("augloader serve", tc.in, flags); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%q:\n got %q\nwant %q…", tc.in, got, tc.want)
		}
	}
}

func TestClosest(t *testing.T) {
	names := []string{"serve", "fetch", "materialize", "stats", "shards", "shuffle", "socket"}
	for _, tc := range []struct{ typed, want string }{
		{"serv", "serve"}, {"servе", "serve"}, {"fecth", "fetch"}, {"materialise", "materialize"},
		{"shard", "shards"}, {"sokcet", "socket"}, {"xyz", ""}, {"s", ""},
	} {
		if got := cliutil.Closest(tc.typed, names); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.typed, got, tc.want)
		}
	}
}

func TestUnknownCommand(t *testing.T) {
	app := &cli.App{Name: "augloader", Commands: []*cli.Command{{Name: "serve"}, {Name: "fetch"}}}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"augloader", "serv"}, "augloader: no command \"serv\" (did you mean \"serve\"?)\nRun 'augloader --help' for its commands."},
		{[]string{"augloader", "serve", "--x"}, ""},
		{[]string{"augloader", "--help"}, ""},
		{[]string{"augloader", "help"}, ""},
		{[]string{"augloader"}, ""},
	} {
		if got := cliutil.UnknownCommand(app, tc.args); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.args, got, tc.want)
		}
	}
}
