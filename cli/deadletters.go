package cli

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hookwarden/hookwarden/receiver/adminapi"
)

func (f *receiverFlags) bind(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVar(&f.url, "receiver", "", "base URL of the receiver's metrics listener, e.g. https://localhost:9090 (default: the receiver's Service, found through the API server and reached by a port-forward)")
	cmd.PersistentFlags().StringVar(&f.service, "receiver-service", "", "NAMESPACE/NAME of the receiver's Service, where the cluster has several (default: the one labelled "+receiverLabel+")")
	cmd.PersistentFlags().StringVar(&f.tokenFile, "receiver-token-file", "", "file with a bearer token for the receiver (with --metrics-secure it checks it by TokenReview and SubjectAccessReview; default through the API server: the kubeconfig's own token)")
	cmd.PersistentFlags().BoolVar(&f.insecureTLS, "receiver-insecure-skip-tls-verify", false, "do not check the receiver's certificate (its default one is self-signed; a port-forward never checks it)")
}

// withReceiver runs fn with the receiver reached once for the command (bounded by --timeout).
func (g *globals) withReceiver(cmd *cobra.Command, f *receiverFlags, fn func(ctx context.Context, r *receiverConn) error) error {
	ctx, cancel := g.withTimeout(cmd.Context())
	defer cancel()
	r, err := g.connectReceiver(ctx, cmd.ErrOrStderr(), f)
	if err != nil {
		return err
	}
	defer r.stop()
	return fn(ctx, r)
}

//nolint:funlen // four cobra subcommands declared in one place, each a few lines
func newDeadLettersCommand(g *globals) *cobra.Command {
	var f receiverFlags
	var limit int
	var subscription string
	cmd := &cobra.Command{
		Use:   "deadletters list|show|replay|purge",
		Short: "The receiver's dead letters: list, show, replay, purge",
		Long: `deadletters talks to the receiver's admin API, served on its metrics listener. By default
it finds the receiver's Service through the API server (label ` + receiverLabel + `, port
metrics; --receiver-service where there are several) and reaches a ready pod behind it by a
port-forward made with the kubeconfig's credentials (pods/portforward), sending the
kubeconfig's own bearer token, or --receiver-token-file's; --receiver URL reaches it directly.
With --metrics-secure it is authenticated and authorized as /metrics is: a TokenReview of the
bearer token, then a SubjectAccessReview for the non-resource URL /deadletters (list) or /deadletters/* with
verb get (list, show) or post (replay, purge). The ClusterRoles deadletters-viewer and
deadletters-admin grant them.

replay puts the event back on the normal delivery path (the same job, the same event id, so the
sink receives the same Idempotency-Key, with the CloudEvents attribute hookwardenreplay); purge drops it from the dead letters without delivering
it (the event stays in the ledger, so a redelivery by the provider is still a duplicate).`,
	}
	f.bind(cmd)
	list := &cobra.Command{
		Use: "list", Short: "List dead letters", Args: cobra.NoArgs,
		Example: "  hookwarden deadletters list --receiver https://localhost:9090 --receiver-token-file token --receiver-insecure-skip-tls-verify",
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := adminapi.DeadLettersPath + "?limit=" + strconv.Itoa(limit)
			if subscription != "" {
				path += "&subscription=" + subscription
			}
			var out []adminapi.DeadLetter
			if err := g.withReceiver(cmd, &f, func(ctx context.Context, r *receiverConn) error {
				return r.call(ctx, http.MethodGet, path, &out)
			}); err != nil {
				return err
			}
			return g.print(cmd.OutOrStdout(), out, func(t *table) {
				t.header("ID", "SUBSCRIPTION", "EVENT", "TYPE", "ATTEMPTS", "RECEIVED", "LAST-ERROR")
				for _, d := range out {
					t.row(strconv.FormatInt(d.ID, 10), d.Subscription, d.EventID, dash(d.EventType), strconv.Itoa(d.Attempts), d.ReceivedAt.Format(time.RFC3339), dash(d.LastError))
				}
			})
		},
	}
	list.Flags().IntVar(&limit, "limit", 100, "most dead letters to list")
	list.Flags().StringVar(&subscription, "subscription", "", "only those of this subscription (namespace/name)")
	show := &cobra.Command{
		Use: "show ID", Short: "Show one dead letter with its payload", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			var d adminapi.DeadLetter
			if err := g.withReceiver(cmd, &f, func(ctx context.Context, r *receiverConn) error {
				return r.call(ctx, http.MethodGet, adminapi.DeadLettersPath+"/"+strconv.FormatInt(id, 10), &d)
			}); err != nil {
				return err
			}
			if g.output == "" || g.output == "table" {
				g.output = "yaml"
			}
			return g.print(cmd.OutOrStdout(), d, nil)
		},
	}
	act := func(verb, done string) *cobra.Command {
		return &cobra.Command{
			Use: verb + " ID...", Short: strings.ToUpper(verb[:1]) + verb[1:] + " dead letters", Args: cobra.MinimumNArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				ids := make([]int64, len(args))
				for i, a := range args {
					id, err := parseID(a)
					if err != nil {
						return err
					}
					ids[i] = id
				}
				return g.withReceiver(cmd, &f, func(ctx context.Context, r *receiverConn) error {
					for i, id := range ids {
						var out map[string]any
						if err := r.call(ctx, http.MethodPost, fmt.Sprintf("%s/%d/%s", adminapi.DeadLettersPath, id, verb), &out); err != nil {
							return fmt.Errorf("%s %d (%d of %d done): %w", verb, id, i, len(ids), err)
						}
						fmt.Fprintf(cmd.OutOrStdout(), "%s %d\n", done, id)
					}
					return nil
				})
			},
		}
	}
	cmd.AddCommand(list, show, act("replay", "replayed"), act("purge", "purged"))
	return cmd
}

func parseID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, usageError("dead letter id %q: want a positive number (see deadletters list)", s)
	}
	return id, nil
}
