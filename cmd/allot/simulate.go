package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"allot.dev/allot/api/scheme"
	"allot.dev/allot/internal/scheduler/simulate"
	"allot.dev/allot/pkg/allocator"
)

func newSimulateCommand() *cobra.Command {
	var files []string
	var output, templateFile string
	var maxNodes int
	cmd := &cobra.Command{
		Use:   "simulate -f FILE...",
		Short: "Schedule pods from files against nodes from files, without a server",
		Long: `Read Nodes, NodeResourceSlices, ResourceClasses, ResourceClassParameters,
ResourceClaimParameters, ResourceClaims, ResourceClaimTemplates, vendor
parameter objects and Pods from files, and resource.k8s.io/v1 ResourceSlices,
DeviceClasses, ResourceClaims, ResourceClaimTemplates and DeviceTaintRules
mixed freely with them; schedule the pods that have no node in file order
with the scheduler's own plugins (node checks, resources and structured
claims of both versions, DeviceTaintRules tainting the devices they select),
and print the resulting Pods and ResourceClaims (each in its own version,
v1 claims with their allocations as a v1 claim's status carries them) as one
List, as the cluster would store them. Pods left pending carry
PodScheduled=False with the reasons. With --node-template (a file with one
Node and its NodeResourceSlices and ResourceSlices), also report on stderr
how many such nodes the pending pods need. Pending pods are a result: the
exit status is 0 when the simulation ran.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			objs, err := readTypedObjects(files, cmd.InOrStdin())
			if err != nil {
				return err
			}
			opts := simulate.Options{MaxNodes: maxNodes}
			if templateFile != "" {
				if opts.Template, err = readTemplate(templateFile, cmd.InOrStdin()); err != nil {
					return err
				}
			}
			out, err := simulate.Run(cmd.Context(), objs, opts)
			if err != nil {
				return fmt.Errorf("simulate: %w", err)
			}
			if err := printSimulation(cmd.OutOrStdout(), output, out); err != nil {
				return err
			}
			reportSimulation(cmd.ErrOrStderr(), out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&files, "filename", "f", nil, "files or directories to read (- for stdin)")
	f.StringVarP(&output, "output", "o", "yaml", "output format: yaml or json")
	f.StringVar(&templateFile, "node-template", "", "a Node and its NodeResourceSlices and ResourceSlices to count new nodes with")
	f.IntVar(&maxNodes, "max-new-nodes", 100, "the most new nodes to consider")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

// readTypedObjects decodes manifests strictly into typed objects; kinds
// allot does not know (vendor parameters) stay unstructured.
func readTypedObjects(paths []string, stdin io.Reader) ([]runtime.Object, error) {
	ms, errs := readManifests(paths, stdin)
	if len(errs) > 0 {
		for _, e := range errs {
			fmt.Fprintln(os.Stderr, "error:", e)
		}
		return nil, fmt.Errorf("%d document(s) could not be read; nothing was simulated", len(errs))
	}
	out := make([]runtime.Object, 0, len(ms))
	for _, m := range ms {
		if !scheme.Scheme.Recognizes(m.gvk) {
			out = append(out, m.obj)
			continue
		}
		obj, err := scheme.Scheme.New(m.gvk)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.where(), err)
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m.obj.Object, obj); err != nil {
			return nil, fmt.Errorf("%s: convert %s: %w", m.where(), m.gvk.Kind, err)
		}
		obj.GetObjectKind().SetGroupVersionKind(m.gvk)
		out = append(out, obj)
	}
	return out, nil
}

func readTemplate(file string, stdin io.Reader) (*allocator.NodeTemplate, error) {
	objs, err := readTypedObjects([]string{file}, stdin)
	if err != nil {
		return nil, err
	}
	snap, _, _ := allocator.SplitObjects(objs)
	if len(snap.Nodes) != 1 {
		return nil, fmt.Errorf("--node-template %s: want exactly one Node, found %d", file, len(snap.Nodes))
	}
	return &allocator.NodeTemplate{Node: snap.Nodes[0], Slices: snap.Slices, V1Slices: snap.V1Slices}, nil
}

// printSimulation prints the pods and claims as one v1 List.
func printSimulation(w io.Writer, format string, out *simulate.Output) error {
	items := make([]runtime.Object, 0, len(out.Pods)+len(out.Claims)+len(out.V1Claims))
	for _, p := range out.Pods {
		p.APIVersion, p.Kind = "v1", "Pod"
		items = append(items, p)
	}
	for _, c := range out.Claims {
		c.APIVersion, c.Kind = "resource.k8s.io/v1alpha2", "ResourceClaim"
		items = append(items, c)
	}
	for _, c := range out.V1Claims {
		c = c.DeepCopy()
		c.APIVersion, c.Kind = "resource.k8s.io/v1", "ResourceClaim"
		items = append(items, c)
	}
	list := map[string]any{"apiVersion": "v1", "kind": "List", "items": items}
	var data []byte
	var err error
	switch format {
	case "json":
		data, err = json.MarshalIndent(list, "", "    ")
		data = append(data, '\n')
	case "yaml":
		data, err = yaml.Marshal(list)
	default:
		return fmt.Errorf("unknown output format %q (yaml or json)", format)
	}
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	_, err = w.Write(data)
	return err
}

// reportSimulation summarises on stderr what is not part of the List.
func reportSimulation(w io.Writer, out *simulate.Output) {
	for _, p := range out.Problems {
		fmt.Fprintf(w, "slice problem: %v\n", p)
	}
	for _, s := range out.Warnings {
		fmt.Fprintln(w, "warning:", s)
	}
	for _, t := range out.DeviceTaints {
		fmt.Fprintln(w, "device taint:", t)
	}
	if n := out.NodesNeeded; n != nil {
		fmt.Fprintf(w, "new nodes needed: %d %v\n", n.Nodes, n.NodeNames)
		for pod, reasons := range n.Unplaceable {
			fmt.Fprintf(w, "fits no new node: %s: %v\n", pod, reasons)
		}
	}
}
