package cli

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hookwarden/hookwarden/receiver/adminapi"
)

// receiverFlags reach the receiver's metrics listener (its /metrics and admin API).
type receiverFlags struct {
	url         string
	tokenFile   string
	insecureTLS bool
}

func (f *receiverFlags) bind(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVar(&f.url, "receiver", "", "base URL of the receiver's metrics listener, e.g. https://hookwarden-receiver-metrics.hookwarden-system:9090 (or a kubectl port-forward)")
	cmd.PersistentFlags().StringVar(&f.tokenFile, "receiver-token-file", "", "file with a bearer token (with --metrics-secure the receiver checks it by TokenReview and SubjectAccessReview)")
	cmd.PersistentFlags().BoolVar(&f.insecureTLS, "receiver-insecure-skip-tls-verify", false, "do not check the receiver's certificate (its default one is self-signed)")
}

// call sends one admin request and decodes the JSON answer into out.
func (f *receiverFlags) call(ctx context.Context, method, path string, out any) error {
	if f.url == "" {
		return usageError("--receiver is required")
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(f.url, "/")+path, nil)
	if err != nil {
		return usageError("--receiver: %v", err)
	}
	if f.tokenFile != "" {
		tok, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return usageError("--receiver-token-file: %v", err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	if f.insecureTLS {
		hc.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // asked for by flag
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("reaching the receiver: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("reading the receiver's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		msg := strings.TrimSpace(string(body))
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		switch resp.StatusCode {
		case http.StatusNotFound, http.StatusBadRequest:
			return usageError("the receiver answered %s: %s", resp.Status, msg)
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("the receiver answered %s: the token needs verb %s on %s (ClusterRole deadletters-viewer or deadletters-admin)", resp.Status, strings.ToLower(method), path)
		}
		return fmt.Errorf("the receiver answered %s: %s", resp.Status, msg)
	}
	return json.Unmarshal(body, out)
}

func newDeadLettersCommand(g *globals) *cobra.Command {
	var f receiverFlags
	var limit int
	var subscription string
	cmd := &cobra.Command{
		Use:   "deadletters list|show|replay|purge",
		Short: "The receiver's dead letters: list, show, replay, purge",
		Long: `deadletters talks to the receiver's admin API, served on its metrics listener and, with
--metrics-secure, authenticated and authorized as /metrics is: a TokenReview of the bearer token,
then a SubjectAccessReview for the non-resource URL /deadletters (list) or /deadletters/* with
verb get (list, show) or post (replay, purge). The ClusterRoles deadletters-viewer and
deadletters-admin grant them.

replay puts the event back on the normal delivery path (the same job, the same event id, so the
sink receives the same Idempotency-Key); purge drops it from the dead letters without delivering
it (the event stays in the ledger, so a redelivery by the provider is still a duplicate).`,
	}
	f.bind(cmd)
	list := &cobra.Command{
		Use: "list", Short: "List dead letters", Args: cobra.NoArgs,
		Example: "  hookwarden deadletters list --receiver https://localhost:9090 --receiver-token-file token --receiver-insecure-skip-tls-verify",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := g.withTimeout(cmd.Context())
			defer cancel()
			path := adminapi.DeadLettersPath + "?limit=" + strconv.Itoa(limit)
			if subscription != "" {
				path += "&subscription=" + subscription
			}
			var out []adminapi.DeadLetter
			if err := f.call(ctx, http.MethodGet, path, &out); err != nil {
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
			ctx, cancel := g.withTimeout(cmd.Context())
			defer cancel()
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			var d adminapi.DeadLetter
			if err := f.call(ctx, http.MethodGet, adminapi.DeadLettersPath+"/"+strconv.FormatInt(id, 10), &d); err != nil {
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
				ctx, cancel := g.withTimeout(cmd.Context())
				defer cancel()
				for i, a := range args {
					id, err := parseID(a)
					if err != nil {
						return err
					}
					var out map[string]any
					if err := f.call(ctx, http.MethodPost, fmt.Sprintf("%s/%d/%s", adminapi.DeadLettersPath, id, verb), &out); err != nil {
						return fmt.Errorf("%s %d (%d of %d done): %w", verb, id, i, len(args), err)
					}
					fmt.Fprintf(cmd.OutOrStdout(), "%s %d\n", done, id)
				}
				return nil
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
