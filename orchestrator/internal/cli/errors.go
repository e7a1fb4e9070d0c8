package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/tracing/tracesetup"
)

// Main runs the command line with args and returns the process exit code.
// An error is one line on stderr, "toolscope: ...", or with --json one
// object {"error":{"code","message","exit"[,"flag"]}} on stderr: stdout
// carries results only, so a script never takes an error for a result.
//
// local makes the commands that run the orchestrator in this process
// (serve, demo: package servercmd); nil in the toolscope binary, which runs
// those two from the toolscope-server binary instead (ADR 0035).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, local Local) int {
	// Off unless the OTEL_* environment asks (tracesetup.Enabled); a
	// command's last spans leave before it exits.
	if endTracing, err := tracesetup.Setup(ctx, "toolscope"); err != nil {
		fmt.Fprintf(stderr, "toolscope: %v; running without traces\n", err)
	} else {
		defer endTracing()
	}
	root := NewRoot(stdout, stderr, local, args)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	if cmd == nil {
		cmd = root
	}
	code := ExitCode(err)
	msg, flagName := describe(cmd, err)
	if code == ExitUsage && !strings.Contains(msg, "--help") {
		msg += fmt.Sprintf("; see '%s --help'", cmd.CommandPath())
	}
	if jsonRequested(root, args) {
		e := jsonError{Code: errorCode(err), Message: msg, Exit: code, Flag: flagName}
		_ = json.NewEncoder(stderr).Encode(map[string]jsonError{"error": e})
		return code
	}
	fmt.Fprintf(stderr, "toolscope: %s\n", msg)
	return code
}

type jsonError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Exit    int    `json:"exit"`
	Flag    string `json:"flag,omitempty"`
}

// jsonRequested reports --json, also when flag parsing stopped before it.
func jsonRequested(root *cobra.Command, args []string) bool {
	if f := root.PersistentFlags().Lookup("json"); f != nil && f.Value.String() == "true" {
		return true
	}
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "--json" || a == "--json=true" {
			return true
		}
	}
	return false
}

// Exit codes, one per error class, for scripts.
const (
	ExitError         = 1 // anything else
	ExitUsage         = 2 // bad flags or arguments, or an invalid field
	ExitNotFound      = 3
	ExitAlreadyExists = 4
	ExitPrecondition  = 5 // the request is valid but the state forbids it
	ExitUnavailable   = 6 // the server, or something it needs, is unreachable
	ExitDenied        = 7 // no, a wrong, expired or revoked credential, or a role that may not do this
)

// ExitCode maps an error to the process exit code.
func ExitCode(err error) int {
	var usage *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &usage), errors.Is(err, errdefs.ErrInvalidArgument):
		return ExitUsage
	case errors.Is(err, errdefs.ErrNotFound):
		return ExitNotFound
	case errors.Is(err, errdefs.ErrAlreadyExists):
		return ExitAlreadyExists
	case errors.Is(err, errdefs.ErrFailedPrecondition):
		return ExitPrecondition
	case errors.Is(err, errdefs.ErrUnavailable):
		return ExitUnavailable
	case errors.Is(err, errdefs.ErrUnauthenticated), errors.Is(err, errdefs.ErrPermissionDenied):
		return ExitDenied
	}
	return ExitError
}

// errorClasses are the stable codes of --json errors, in the order they
// are tried, with the class names that human output drops when a message
// ends with them (": failed precondition"): the exit code says the class.
// "not found" and "already exists" read as English and stay.
var errorClasses = []struct {
	sentinel error
	code     string
	drop     bool
}{
	{errdefs.ErrInvalidArgument, "invalid_argument", true},
	{errdefs.ErrNotFound, "not_found", false},
	{errdefs.ErrAlreadyExists, "already_exists", false},
	{errdefs.ErrFailedPrecondition, "failed_precondition", true},
	{errdefs.ErrUnavailable, "unavailable", true},
	{errdefs.ErrUnauthenticated, "unauthenticated", true},
	{errdefs.ErrPermissionDenied, "permission_denied", true},
	{errdefs.ErrResourceExhausted, "resource_exhausted", true},
	{errdefs.ErrUnimplemented, "unimplemented", true},
	{context.DeadlineExceeded, "deadline_exceeded", false},
	{context.Canceled, "canceled", false},
}

// errorCode is the stable code of err for --json.
func errorCode(err error) string {
	var usage *usageError
	if errors.As(err, &usage) {
		return "invalid_argument"
	}
	for _, c := range errorClasses {
		if errors.Is(err, c.sentinel) {
			return c.code
		}
	}
	return "error"
}

// describe is err's one-line message for cmd: a field error names the flag
// the user typed (see mapFields), a trailing class name is dropped, and
// the flag is returned too when known.
func describe(cmd *cobra.Command, err error) (msg, flagName string) {
	var fe *errdefs.FieldError
	if errors.As(err, &fe) {
		if f := flagFor(cmd, fe.Field); f != "" {
			if fe.Reason == "is required" {
				return f + " is required", f
			}
			return "invalid " + f + ": " + fe.Reason, f
		}
	}
	msg = strings.Join(strings.Fields(err.Error()), " ")
	for _, c := range errorClasses {
		if c.drop && errors.Is(err, c.sentinel) {
			if trimmed, ok := strings.CutSuffix(msg, ": "+c.sentinel.Error()); ok && trimmed != "" {
				msg = trimmed
			}
		}
	}
	return msg, ""
}

// fieldsAnnotation holds a command's table of API fields to CLI flags.
const fieldsAnnotation = "toolscope/fields"

// mapFields records, once per command, which flag the user typed for each
// request field the server may name in an error: pairs of field, flag
// ("path", "--url"); a field also covers its elements and parts
// ("server.stdio.env" covers "server.stdio.env[1].name", shown as the
// flag's second use, "--env #2"). A field with no entry that matches a flag of the
// command by name (workspace_id: --workspace-id or --workspace) needs none.
func mapFields(cmd *cobra.Command, pairs ...string) {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	var b strings.Builder
	for i := 0; i+1 < len(pairs); i += 2 {
		fmt.Fprintf(&b, "%s=%s\n", pairs[i], pairs[i+1])
	}
	cmd.Annotations[fieldsAnnotation] = b.String()
}

// flagFor is the flag that sets field on cmd, or "".
func flagFor(cmd *cobra.Command, field string) string {
	for _, line := range strings.Split(cmd.Annotations[fieldsAnnotation], "\n") {
		f, flag, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		if field == f || strings.HasPrefix(field, f+".") {
			return flag
		}
		// The n-th element of a repeated field is the flag's n-th use.
		if rest, ok := strings.CutPrefix(field, f+"["); ok {
			var i int
			if _, err := fmt.Sscanf(rest, "%d]", &i); err == nil {
				return fmt.Sprintf("%s #%d", flag, i+1)
			}
			return flag
		}
	}
	name := strings.ReplaceAll(field, "_", "-")
	for _, n := range []string{name, strings.TrimSuffix(name, "-id")} {
		if cmd.Flags().Lookup(n) != nil {
			return "--" + n
		}
	}
	return ""
}

// numberSyntax is strconv's part of pflag's message for a bad number.
var numberSyntax = regexp.MustCompile(`: strconv\.Parse\w+: parsing "[^"]*": invalid syntax()`)

// commandName is cmd's path without the program name ("task get").
func commandName(cmd *cobra.Command) string {
	if !cmd.HasParent() {
		return cmd.Name()
	}
	_, rest, _ := strings.Cut(cmd.CommandPath(), " ")
	return rest
}

// conventions applies the house rules of usage errors to the whole tree:
// a bad flag or flag value, an unknown subcommand and a negative duration
// are usage errors (exit 2) that point at --help; a group given no
// subcommand prints its help.
func conventions(root *cobra.Command) {
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return Usagef("%s: %s", commandName(cmd), numberSyntax.ReplaceAllString(err.Error(), ": not a whole number$1"))
	})
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		if cmd.HasSubCommands() && !cmd.Runnable() {
			cmd.Args = unknownSubcommand
			cmd.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		}
		if cmd.PreRun == nil {
			// A command's own PreRunE (servercmd's build check) runs
			// first, then the durations' check.
			own := cmd.PreRunE
			cmd.PreRunE = func(cmd *cobra.Command, args []string) error {
				if own != nil {
					if err := own(cmd, args); err != nil {
						return err
					}
				}
				return checkDurations(cmd)
			}
		}
		for _, c := range cmd.Commands() {
			walk(c)
		}
	}
	walk(root)
}

func unknownSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf("; did you mean %q?", s[0])
	}
	return Usagef("%s", msg)
}

// checkDurations refuses a negative duration in any flag the command was
// given, and a --timeout that is not positive.
func checkDurations(cmd *cobra.Command) error {
	var err error
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if err != nil || f.Value.Type() != "duration" {
			return
		}
		d, perr := time.ParseDuration(f.Value.String())
		switch {
		case perr != nil:
		case d < 0:
			err = Usagef("invalid --%s %s: give 0 or more", f.Name, d)
		case d == 0 && f.Name == "timeout":
			err = Usagef("invalid --timeout 0s: give a positive duration")
		}
	})
	return err
}

type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// Usagef is a usage error (exit code ExitUsage): what the user typed, and
// what to give instead.
func Usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }
