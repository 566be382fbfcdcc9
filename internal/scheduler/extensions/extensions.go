// Package extensions is the scheduler's in-tree registry of scheduler
// extensions (framework.SnapshotExtender, framework.HoldExtension, ...):
// the plugins' sides in the scheduler process. The scheduler's core gets
// its extensions here and names no plugin; each extension lives in its own
// package (internal/scheduler/dra for DynamicResources) and may use the
// API client and informers, which plugins may not.
package extensions

import (
	"context"
	"log/slog"
	"time"

	"allot.dev/allot/internal/scheduler/dra"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/plugins"
	"allot.dev/allot/internal/scheduler/plugins/dynamicresources"
	"allot.dev/allot/pkg/client"
)

// Host is what extensions get from the scheduler.
type Host struct {
	// Client makes the extensions' API writes; nil in tests without an API
	// server.
	Client *client.Client
	// APITimeout bounds each write.
	APITimeout time.Duration
	Log        *slog.Logger
	Queue      framework.QueueHandle
}

// Informed is an extension that reads informers. The scheduler calls
// Inform once with its factory, before it starts the factory; an extension
// never informed works without its informers' objects.
type Informed interface {
	Inform(f *client.Factory) error
}

// New returns the in-tree extensions, and sets in o the plugin instances
// they serve: every framework built from o then runs the same instances
// (their in-memory reservations are the extensions' too).
func New(o *plugins.Options, h Host) []framework.Plugin {
	p := o.DynamicResources
	if p == nil {
		p = dynamicresources.New()
		o.DynamicResources = p
	}
	return []framework.Plugin{dra.New(p, dra.Config{Client: h.Client, APITimeout: h.APITimeout, Log: h.Log, Queue: h.Queue})}
}

// ExtendListed adds to snap the extensions' objects from one List of each
// kind they read, each List with its own timeout, for `allot explain`
// (scheduler.ListSnapshot).
func ExtendListed(ctx context.Context, c *client.Client, timeout time.Duration, snap *framework.Snapshot) (*framework.Snapshot, error) {
	objs, err := dra.List(ctx, c, timeout)
	if err != nil {
		return nil, err
	}
	return snap.WithExtension(dynamicresources.Name, objs), nil
}
