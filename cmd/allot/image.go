package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"allot.dev/allot/internal/node/runtime/images"
	"allot.dev/allot/internal/node/runtime/runc"
)

// defaultImageRootDir is the node agent's default root directory; the
// image store is ROOT/images.
const defaultImageRootDir = "/var/lib/allot"

func newImageCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Manage the node's local image store (runc runtime)",
		Long: `The runc runtime runs containers from a local image store under the node
agent's root directory (ROOT/images). busybox is built in; other images are
imported from root filesystem tarballs, for example the output of
"docker export" or "tar -C rootfs -c .".`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newImageImportCommand(), newImageListCommand())
	return cmd
}

func newImageImportCommand() *cobra.Command {
	var (
		rootDir string
		cfg     images.Config
		force   bool
	)
	cmd := &cobra.Command{
		Use:   "import NAME ROOTFS.tar|-",
		Short: "Add an image from a root filesystem tar (plain or gzip; - reads stdin)",
		Long: `Add an image from a root filesystem tar, plain or gzip-compressed (- reads
stdin). NAME is normalized as container runtimes do: docker.io/library/app:latest
is app. --entrypoint and --cmd are repeatable, one argument each, and become
the image's defaults for containers that do not set command or args.`,
		Example: `  docker export $(docker create alpine) | allot image import alpine -
  allot image import tools:v1 rootfs.tar.gz --cmd sh --env LANG=C.UTF-8`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var in io.Reader = cmd.InOrStdin()
			if args[1] != "-" {
				f, err := os.Open(args[1])
				if err != nil {
					return fmt.Errorf("open rootfs tar: %w", err)
				}
				defer f.Close()
				in = f
			}
			for _, kv := range cfg.Env {
				if !strings.Contains(kv, "=") {
					return fmt.Errorf("--env %q: want KEY=VALUE", kv)
				}
			}
			store := images.New(runc.ImageStoreDir(rootDir))
			img, err := store.ImportReader(cmd.Context(), args[0], in, cfg, force)
			if errors.Is(err, images.ErrExists) {
				return fmt.Errorf("%w (use --force to replace it)", err)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "image %s imported into %s\n", img.Name, store.Dir())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&rootDir, "root-dir", defaultImageRootDir, "the node agent's root directory")
	f.StringArrayVar(&cfg.Entrypoint, "entrypoint", nil, "default entrypoint argument (repeatable)")
	f.StringArrayVar(&cfg.Cmd, "cmd", nil, "default cmd argument (repeatable)")
	f.StringArrayVar(&cfg.Env, "env", nil, "default environment variable KEY=VALUE (repeatable)")
	f.StringVar(&cfg.WorkingDir, "workdir", "", "default working directory")
	f.BoolVar(&force, "force", false, "replace an existing image of that name (not while containers use it)")
	return cmd
}

func newImageListCommand() *cobra.Command {
	var rootDir string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the images of the node's store",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			list, err := images.New(runc.ImageStoreDir(rootDir)).List()
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 8, 3, ' ', 0)
			fmt.Fprintln(tw, "NAME\tCREATED\tCOMMAND")
			for _, img := range list {
				command := strings.Join(append(append([]string{}, img.Config.Entrypoint...), img.Config.Cmd...), " ")
				fmt.Fprintf(tw, "%s\t%s\t%s\n", img.Name, img.Created.Format("2006-01-02 15:04:05"), command)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&rootDir, "root-dir", defaultImageRootDir, "the node agent's root directory")
	return cmd
}
