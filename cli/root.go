// Package cli is the hookwarden command line (also the kubectl plugin kubectl-hookwarden):
// plan, status and the other commands that YAML and kubectl get cannot do. cmd/hookwarden only
// calls Run.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"

	"github.com/hookwarden/hookwarden/internal/version"
	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/builtin"
)

// Exit codes, as documented in docs/cli.md.
const (
	ExitOK = 0
	// ExitError: the command failed (an unreachable cluster, a provider error, a refused write).
	ExitError = 1
	// ExitPending: plan found changes pending (as terraform plan -detailed-exitcode).
	ExitPending = 2
	// ExitUsage: bad input (flags, a file holding no WebhookSubscription, a selector matching
	// nothing).
	ExitUsage = 3
	// ExitTimeout: --timeout passed or the command was interrupted; running it again resumes.
	ExitTimeout = 4
	// ExitBlocked: plan found a subscription that cannot go on as it is (a conflict or a
	// stall): a human must act.
	ExitBlocked = 5
)

// exitError carries an exit code with the one line printed for it.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageError(format string, args ...any) error {
	return &exitError{code: ExitUsage, err: fmt.Errorf(format, args...)}
}

// pendingChanges is returned by plan when changes are pending (after printing them).
var pendingChanges = &exitError{code: ExitPending, err: errors.New("changes are pending")}

// Options are what the commands are built with; tests set them, main uses the defaults.
type Options struct {
	Streams genericiooptions.IOStreams
	// Registry is the provider registry (default: builtin.Registry(), as the manager's).
	Registry providers.Registry
	// WrapConfig, when set, wraps the cluster's client config (tests count requests with it).
	WrapConfig func(*rest.Config) *rest.Config
	// Now is the clock (default time.Now).
	Now func() time.Time
	// DisplayName is how usage names the command ("kubectl hookwarden" as the plugin).
	DisplayName string
	// PortForward reaches a pod's port through the API server (default: a SPDY port-forward,
	// as kubectl port-forward; tests, whose API server has no kubelet, pass another).
	PortForward PortForwardFunc
	// SetVerbosity sets the log level of the Kubernetes client (-v; main sets klog's).
	SetVerbosity func(level int)
}

// globals are the flags every command shares.
type globals struct {
	opts          Options
	kube          *genericclioptions.ConfigFlags
	allNamespaces bool
	output        string
	timeout       time.Duration
	verbosity     int
}

// Run runs the command line with args (without the program name) and returns the exit code.
func Run(ctx context.Context, args []string, o Options) int {
	if o.Registry == nil {
		o.Registry = builtin.Registry()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	root := NewCommand(o)
	root.SetArgs(args)
	root.SetIn(o.Streams.In)
	root.SetOut(o.Streams.Out)
	root.SetErr(o.Streams.ErrOut)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.code != ExitPending {
			fmt.Fprintln(o.Streams.ErrOut, "error:", oneLine(ee.err))
		}
		return ee.code
	}
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		fmt.Fprintln(o.Streams.ErrOut, "error:", oneLine(err), "(run the command again to resume)")
		return ExitTimeout
	}
	if isFlagError(err) {
		fmt.Fprintln(o.Streams.ErrOut, "error:", oneLine(err))
		return ExitUsage
	}
	fmt.Fprintln(o.Streams.ErrOut, "error:", oneLine(err))
	return ExitError
}

// isFlagError reports errors of cobra's and pflag's own parsing (unknown flags, commands,
// arguments), which are bad input.
func isFlagError(err error) bool {
	s := err.Error()
	for _, p := range []string{"unknown flag", "unknown shorthand", "unknown command", "flag needs an argument", "invalid argument", "accepts ", "requires at least", "required flag"} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// oneLine keeps an error on one line: no stack, no multi-line API server bodies.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// NewCommand builds the command tree.
func NewCommand(o Options) *cobra.Command {
	g := &globals{opts: o, kube: genericclioptions.NewConfigFlags(true)}
	if o.WrapConfig != nil {
		g.kube.WrapConfigFn = o.WrapConfig
	}
	root := &cobra.Command{
		Use:           "hookwarden",
		Short:         "Plan, import, rotate and inspect Hookwarden webhook subscriptions",
		Long:          "hookwarden works with the WebhookSubscriptions of the cluster in your kubeconfig (also as the kubectl plugin: kubectl hookwarden).\n\nExit codes: 0 ok, 1 error, 2 plan has pending changes, 3 bad input or usage, 4 timed out or interrupted (run again to resume), 5 plan found a conflict or a stall.",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       "hookwarden " + version.Get().String(),
	}
	if o.DisplayName != "" {
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: o.DisplayName}
	}
	// --version without a shorthand: -v is kubectl's log level (cobra would make it --version).
	root.Flags().Bool("version", false, "print the version (as the version command)")
	root.SetVersionTemplate("{{.Version}}\n")
	g.kube.AddFlags(root.PersistentFlags())
	root.PersistentFlags().IntVarP(&g.verbosity, "v", "v", 0, "log level of the Kubernetes client, as kubectl's -v (6: each API request, 8: with bodies)")
	root.PersistentFlags().BoolVarP(&g.allNamespaces, "all-namespaces", "A", false, "work on subscriptions in all namespaces")
	root.PersistentFlags().StringVarP(&g.output, "output", "o", "", "output format: table (default), yaml or json")
	root.PersistentFlags().DurationVar(&g.timeout, "timeout", 5*time.Minute, "give up after this long (exit 4; running the command again resumes)")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if g.verbosity > 0 && g.opts.SetVerbosity != nil {
			g.opts.SetVerbosity(g.verbosity)
		}
		switch g.output {
		case "", "table", "yaml", "json":
			return nil
		}
		return usageError("--output %q: want table, yaml or json", g.output)
	}
	root.AddCommand(newPlanCommand(g), newStatusCommand(g), newImportCommand(g), newRotateCommand(g), newDeadLettersCommand(g), newEventsCommand(g), newRecoverCommand(g), newCompletionCommand(), newVersionCommand(g))
	g.registerCompletions(root)
	return root
}

// withTimeout bounds a command by --timeout.
func (g *globals) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if g.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, g.timeout)
}

// progress writes a progress line to stderr (never to stdout, which carries the result).
func (g *globals) progress(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, format+"\n", args...)
}

func newCompletionCommand() *cobra.Command {
	return &cobra.Command{
		Use:       "completion bash|zsh|fish|powershell",
		Short:     "Print a shell completion script",
		Long:      "Print a completion script: source <(hookwarden completion bash), or write it where your shell loads completions (PowerShell: hookwarden completion powershell | Out-String | Invoke-Expression). Subscription names, namespaces, contexts and built-in REST profiles complete from the cluster and the kubeconfig.",
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"bash", "zsh", "fish", "powershell"},
		RunE: func(cmd *cobra.Command, args []string) error {
			root := cmd.Root()
			out := cmd.OutOrStdout()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(out, true)
			case "zsh":
				return root.GenZshCompletion(out)
			case "fish":
				return root.GenFishCompletion(out, true)
			case "powershell":
				return root.GenPowerShellCompletionWithDesc(out)
			}
			return usageError("completion %q: want bash, zsh, fish or powershell", args[0])
		},
	}
}

// newVersionCommand prints the command line's version (kubectl version --client, flux version
// --client): -o yaml|json for data.
func newVersionCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of the command line",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := version.Get()
			if g.output == "yaml" || g.output == "json" {
				return g.print(cmd.OutOrStdout(), map[string]any{"version": v.Version, "revision": v.Revision, "modified": v.Modified, "goVersion": v.GoVersion}, nil)
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), "hookwarden "+v.String())
			return err
		},
	}
}
