package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

func newClusterCmd(cfg *config) *cobra.Command {
	cmd := &cobra.Command{Use: "cluster", Short: "Show which server leads and the servers of the cluster", Args: args()}
	out := addOutputFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return callAndPrint(cmd, cfg, out, (*client.Client).Cluster, cfg.printCluster)
	}
	return cmd
}

// printCluster shows the leader, then the servers as a table, the leader marked.
func (cfg *config) printCluster(w io.Writer, c *apitype.Cluster) error {
	leader := ""
	if l := c.Leader; l != nil {
		leader = l.ID
		if _, err := fmt.Fprintf(w, "Leader: %s (%s), term %d, since %s\n\n", l.ID, l.Addr, l.Term, cfg.when(&l.Since)); err != nil {
			return err
		}
	} else if _, err := fmt.Fprint(w, "Leader: none (an election is under way)\n\n"); err != nil {
		return err
	}
	t := newTable(w, "ID", "ADDR", "ROLE", "STARTED", "LAST SEEN")
	for _, s := range c.Servers {
		role := "follower"
		if s.ID == leader {
			role = "leader"
		}
		t.row(s.ID, s.Addr, role, cfg.ago(&s.StartedAt), cfg.ago(&s.LastSeen))
	}
	return t.flush()
}
