package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

func newLogsCommand() *cobra.Command {
	var cf clientFlags
	var container string
	var follow bool
	var tail int64
	cmd := &cobra.Command{
		Use:   "logs POD",
		Short: "Print a container's log, through the API server and the pod's node agent",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := cf.open(cmd)
			if err != nil {
				return err
			}
			pod := args[0]
			if kind, name, ok := strings.Cut(pod, "/"); ok {
				if kind != "pod" && kind != "pods" && kind != "po" {
					return fmt.Errorf("logs works on pods, not %s", kind)
				}
				pod = name
			}
			rc, err := s.c.Logs(cmd.Context(), s.ns, pod, container, follow, tail)
			if err != nil {
				return err
			}
			defer rc.Close()
			if _, err := io.Copy(s.out, rc); err != nil && cmd.Context().Err() == nil {
				return fmt.Errorf("read log of %s: %w", pod, err)
			}
			return nil
		},
	}
	cf.add(cmd)
	f := cmd.Flags()
	f.StringVarP(&container, "container", "c", "", "container (needed when the pod has several)")
	f.BoolVarP(&follow, "follow", "f", false, "keep printing as the log grows")
	f.Int64Var(&tail, "tail", -1, "print only the last N lines (-1: all)")
	return cmd
}
