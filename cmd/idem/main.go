package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"
)

// Exit statuses (see the package documentation).
const (
	exitOK       = 0
	exitError    = 1
	exitUsage    = 2
	exitNotFound = 3
	exitNothing  = 4
	exitRefused  = 5
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], env{getenv: os.Getenv, stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr})
	stop()
	os.Exit(code)
}

// env is what a run reads and writes besides its arguments, so that tests
// run the command in-process.
type env struct {
	getenv         func(string) string
	stdin          io.Reader
	stdout, stderr io.Writer
	// user is the OS user a release records when --by is not given; ""
	// asks the OS.
	user string
}

// command is one subcommand: its flags and what it does with them and its
// positional arguments.
type command struct {
	name, usage string
	flags       func(fs *flag.FlagSet) func(ctx context.Context, c *config, args []string) int
}

var commands = []command{getCommand, listCommand, releaseCommand, statsCommand, checkCommand}

// usageError is a mistake in the command line: exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

func run(ctx context.Context, args []string, e env) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		printUsage(e.stderr)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	var cmd *command
	for i := range commands {
		if commands[i].name == args[0] {
			cmd = &commands[i]
		}
	}
	if cmd == nil {
		fmt.Fprintf(e.stderr, "idem: unknown command %q\n", args[0])
		printUsage(e.stderr)
		return exitUsage
	}
	fs := flag.NewFlagSet("idem "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "usage: idem %s\n\nflags:\n", cmd.usage)
		fs.PrintDefaults()
	}
	c := bindConfig(fs, e)
	do := cmd.flags(fs)
	positional, err := parseInterleaved(fs, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		return exitUsage // the flag package said why
	}
	if err := c.validate(); err != nil {
		fmt.Fprintf(e.stderr, "idem %s: %v\n", cmd.name, err)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return do(ctx, c, positional)
}

// parseInterleaved parses flags given before and after the positional
// arguments ("release --scope S KEY --reason R"), as operators type them;
// "--" ends the flags.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, nil
		}
		if args[0] == "--" {
			return append(positional, args[1:]...), nil
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: idem <command> [flags]")
	fmt.Fprintln(w, "\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  idem %s\n", c.usage)
	}
	fmt.Fprintln(w, "\n`idem <command> -h` lists the command's flags; every command takes the connection flags.")
}

// fail reports err on stderr and returns its exit status: 2 for a usage
// mistake, 1 otherwise.
func fail(c *config, err error) int {
	fmt.Fprintf(c.env.stderr, "idem: %v\n", err)
	var u usageError
	if errors.As(err, &u) {
		return exitUsage
	}
	return exitError
}

// human formats d for a table, rounded to what an operator reads.
func human(d time.Duration) string {
	switch a := max(d, -d); {
	case a >= time.Hour:
		d = d.Round(time.Minute)
	case a >= time.Second:
		d = d.Round(100 * time.Millisecond)
	default:
		d = d.Round(time.Millisecond)
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	return s
}
