// Package validation checks and defaults allot's API objects. The API
// server, the CLI and `allot simulate` all judge objects here, so a manifest
// is accepted or rejected the same way everywhere.
//
// For every kind X there is
//
//	ValidateX(obj) field.ErrorList            // a new object (create)
//	ValidateXUpdate(new, old) field.ErrorList // a write to the main resource
//	ValidateXStatusUpdate(new, old)           // a write to status, for kinds with one
//	DefaultX(obj)                             // for kinds with defaults
//
// and Validate, ValidateUpdate, ValidateStatusUpdate and Default dispatch on
// the object's type. Custom resources are checked against their CRD's schema
// with ValidateCustomResource and defaulted with DefaultCustomResource.
//
// The contract:
//
//   - Every error carries the path of the offending field
//     ("spec.containers[1].name") and a reason written for the user.
//     The returned list is empty when the object is valid.
//   - Validation never mutates its input and never panics, whatever a
//     strict decode (api/scheme.Decode) produced.
//   - Default fills only fields left empty and is idempotent. Validate
//     accepts an object before or after Default: a field left empty that
//     Default would fill is not an error.
//   - Update validation re-validates the new object and checks what may not
//     change (name, namespace, uid, creationTimestamp, and per kind the
//     immutable parts of spec).
//
// What stays with the caller (the API server):
//
//  1. Generate a name from metadata.generateName before storing.
//  2. Enforce namespace presence by scope: namespaced kinds need
//     metadata.namespace, cluster-scoped kinds must not have it. Here only
//     its format is checked.
//  3. Copy the system fields (uid, resourceVersion, creationTimestamp) from
//     the stored object into an update that omits them, and enforce
//     resourceVersion preconditions.
//  4. On a status write, keep the stored spec; on a main write, keep the
//     stored status. ValidateXStatusUpdate checks only metadata and status.
//  5. Limit the size of a whole object.
//  6. Install the CEL compiler for structured-parameter selectors with
//     SetSelectorCompiler (the allocator provides it); until then
//     selectors are only checked to be non-empty.
//  7. Compare decoded quantities with the text they came from
//     (ValidateQuantitiesAsWritten): the parser rounds and caps some
//     before Validate sees them. Both it and ValidateQuantityTexts (run
//     before decoding) first scan the body's bytes once and return when
//     every text that reads as a quantity is plain, as nearly all are;
//     only other bodies are decoded a second time. Validate, ValidateUpdate and
//     ValidateStatusUpdate check the rest of "stored as written"
//     (ValidateQuantities: the canonical text reads back as the amount),
//     on every field of a built-in kind that takes a quantity.
package validation
