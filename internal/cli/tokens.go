package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

func newTokensCmd(cfg *config) *cobra.Command {
	return group("tokens", "Create, list and revoke API tokens (admin)",
		newTokenCreateCmd(cfg),
		newTokenListCmd(cfg),
		newTokenRevokeCmd(cfg),
	)
}

func newTokenCreateCmd(cfg *config) *cobra.Command {
	var (
		req        apitype.CreateTokenRequest
		namespaces []string
	)
	cmd := &cobra.Command{
		Use:   "create --role ROLE --name NAME",
		Short: "Create an API token and print its secret, which is shown only this once",
		Long: "Create an API token and print its secret on stdout (with -o json or yaml, {\"token\": ...} and\n" +
			"the token's fields). The server keeps only a hash of the secret: store it now.\n\n" +
			"Roles: admin (everything, tokens included), operator (submit, trigger, cancel, retry,\n" +
			"pause, drain, apply), viewer (read and logs), worker (the worker protocol only).",
		Example: "  stint tokens create --role viewer --name grafana\n" +
			"  stint tokens create --role operator --name etl-ci --namespaces etl,etl-dev -o json\n" +
			"  stint tokens create --role worker --name gpu-1 --worker-id gpu-1",
		Args: args(),
	}
	fl := cmd.Flags()
	fl.StringVar(&req.Role, "role", "", "admin, operator, viewer or worker (required)")
	fl.StringVar(&req.Name, "name", "", "what the token is for (required)")
	fl.StringSliceVar(&namespaces, "namespaces", nil, "limit an operator or viewer token to these namespaces, comma-separated or repeated (none: all)")
	// --namespace, repeated, was this flag's first spelling; it shadowed the global
	// --namespace (the namespace a command acts in) with another meaning.
	fl.StringArrayVar(&namespaces, "namespace", nil, "")
	_ = fl.MarkDeprecated("namespace", "use --namespaces")
	fl.StringVar(&req.WorkerID, "worker-id", "", "the one worker id a worker token may act as (recommended; none: any)")
	out := addOutputFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := out.check(); err != nil {
			return err
		}
		switch {
		case req.Role == "":
			return Usagef("--role: required (admin, operator, viewer or worker)")
		case req.Name == "":
			return Usagef("--name: required: what the token is for")
		}
		req.Namespaces = namespaces
		c, err := cfg.client(cmd)
		if err != nil {
			return err
		}
		created, err := c.CreateToken(cmd.Context(), &req)
		if err != nil {
			return err
		}
		return out.print(cmd.OutOrStdout(), created, func(w io.Writer) error {
			if _, err := fmt.Fprintln(w, created.Secret); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "created token %s (%s, role %s%s): the secret above is shown only this once\n",
				created.ID, created.Name, created.Role, tokenScope(&created.Token))
			return nil
		})
	}
	return cmd
}

// tokenScope words a token's limits for a sentence: ", namespaces a, b", ", worker w1".
func tokenScope(tk *apitype.Token) string {
	s := ""
	if len(tk.Namespaces) > 0 {
		s += ", namespaces " + strings.Join(tk.Namespaces, ", ")
	}
	if tk.WorkerID != "" {
		s += ", worker " + tk.WorkerID
	}
	return s
}

func newTokenListCmd(cfg *config) *cobra.Command {
	return listCmd(cfg, "List API tokens (never their secrets), revoked ones included", (*client.Client).ListTokens,
		func(w io.Writer, list *apitype.TokenList) error { return cfg.printTokens(w, list.Items) })
}

// printTokens shows tokens as a table.
func (cfg *config) printTokens(w io.Writer, tokens []*apitype.Token) error {
	t := newTable(w, "ID", "NAME", "ROLE", "NAMESPACES", "WORKER", "CREATED", "LAST USED", "REVOKED")
	for _, tk := range tokens {
		ns := "all"
		if len(tk.Namespaces) > 0 {
			ns = strings.Join(tk.Namespaces, ",")
		}
		worker := "-"
		if tk.Role == "worker" {
			worker = tk.WorkerID
			if worker == "" {
				worker = "any"
			}
		}
		t.row(tk.ID, tk.Name, tk.Role, ns, worker, cfg.ago(&tk.CreatedAt), cfg.ago(tk.LastUsedAt), cfg.ago(tk.RevokedAt))
	}
	return t.flush()
}

func newTokenRevokeCmd(cfg *config) *cobra.Command {
	revoke := func(c *client.Client, ctx context.Context, id string) (*apitype.Token, error) {
		return c.RevokeToken(ctx, id)
	}
	return objectCmd(cfg, "revoke ID", "Revoke an API token: it stops working (within seconds on every server)", revoke,
		showDone[*apitype.Token]("token %s revoked"))
}
