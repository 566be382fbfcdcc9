// Package engine is the one allocation engine under both resource.k8s.io
// versions allot serves: one model of devices, one device-use state, one
// definition of a pod's requests and one search (best fit, bounded by the
// context, with explanations). The front ends in package allocator map
// each API onto it: v1 ResourceSlices, DeviceClasses and claims directly,
// seed NodeResourceSlices as projected devices with the partition scheme
// constraint, and seed requests through their own layout (Table) and
// order (Policy).
//
// The model's vocabulary is resource.k8s.io/v1's types (attributes,
// capacities, counters, taints, tolerations), as Kubernetes' own
// structured allocator has it; the engine imports no allot API type and
// no allot package but celenv (CEL values) and the copy-on-write map.
// Nodes are Node (name and labels); a device's node selector is read
// through the Matcher its front end compiled.
//
// It is a pure core: no I/O, no goroutines, no global state except
// bounded caches of compiled selectors and a pool of search arenas.
// Equal inputs give equal outputs.
//
// A front end allocating a pod's claims on a node does, in order:
//
//  1. NewInventory(pools, problems) once per change of the published
//     devices: the pools of every driver (Pool, Device), with the
//     counters each device consumes and, for projected seed leaves,
//     their instance IDs. An Inventory is immutable and shared.
//  2. NewState(inventory), then Use for each device the allocated
//     claims hold (DeviceUse: driver, pool, device, seed instance,
//     share), then Fold; as claims change, Edit a published state and
//     Use the changes on the copy. A published State is never written.
//     A State counts devices by their Inventory index, so it belongs to
//     its Inventory: for a new inventory, count the claims into a new
//     State (a device the inventory lacks, its slice gone, is counted on
//     the side by name, and counts again on the next inventory that has
//     it).
//  3. A Request per pod: per claim its key, whether it is pending, and
//     its requests (Req: an exact request or firstAvailable alternatives,
//     Alt) and constraints (Constraint). It is read-only once built.
//  4. Request.Decide(ctx, state, node) per node: the Solution of least
//     cost and a score, or the Reasons why nothing fits. It fails only
//     with ErrDeadline, when ctx ends first: that is "unknown", never
//     "does not fit".
//  5. Write the allocation results of the node it picks from the
//     Solution (devices by Inventory index, Inventory.At).
//
// A front end whose requests need an order of their own (the seed's best
// fit) lays its devices out itself instead of steps 3 and 4: NewTable,
// Free, Classes, Groups, Table.Search(ctx, policy, ...) with its Policy,
// then Release.
//
// Ownership: inputs are read, never modified, and must not be modified
// while the engine holds them (an Inventory keeps its pools). Inventory,
// State and Request are safe for concurrent use; Decide takes a pooled
// arena per call and returns results it no longer touches. A Table and
// its Policy belong to one goroutine. Inventory.Len, Lookup, At, Uses,
// Counters and ConstraintValue, State.CounterLeft and SchemeLocked, and
// Request.Probe are for tools that explain an answer and for tests.
package engine
