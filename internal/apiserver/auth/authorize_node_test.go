package auth

import "testing"

const sliceRes = "noderesourceslices.resource.k8s.io"

var nodeCases = map[string]authCase{
	// Reads.
	"get other node":           {attrs: req(node1, "get", "nodes").named("n2"), allowed: true},
	"list pods":                {attrs: req(node1, "list", "pods").inNS(""), allowed: true},
	"get pod status":           {attrs: req(node1, "get", "pods/status").named("p1"), allowed: true},
	"watch claims":             {attrs: req(node1, "watch", "resourceclaims.resource.k8s.io"), allowed: true},
	"get class":                {attrs: req(node1, "get", "resourceclasses.resource.k8s.io").named("gpu"), allowed: true},
	"list slices":              {attrs: req(node1, "list", sliceRes), allowed: true},
	"get claim template":       {attrs: req(node1, "get", "resourceclaimtemplates.resource.k8s.io").named("t"), allowed: true},
	"get namespace":            {attrs: req(node1, "get", "namespaces").named(testNS), allowed: true},
	"list claim params denied": {attrs: req(node1, "list", "resourceclaimparameters.resource.k8s.io"), reason: "may only read"},
	"get sched context denied": {attrs: req(node1, "get", "podschedulingcontexts.resource.k8s.io").named("p1")},
	"get pod log denied":       {attrs: req(node1, "get", "pods/log").named("p1")},

	// Its Node.
	"create own node":                 {attrs: req(node1, "create", "nodes").object(makeNode("n1")), allowed: true},
	"update own node":                 {attrs: req(node1, "update", "nodes").named("n1").object(makeNode("n1")).oldObject(makeNode("n1")), allowed: true},
	"update own node status":          {attrs: req(node1, "patch", "nodes/status").named("n1").object(makeNode("n1")), allowed: true},
	"create other node denied":        {attrs: req(node1, "create", "nodes").object(makeNode("n2")), reason: `node "n1" may only write its own Node "n1", not "n2"`},
	"update other node status denied": {attrs: req(node1, "update", "nodes/status").named("n2").object(makeNode("n2"))},
	"body name mismatch denied":       {attrs: req(node1, "update", "nodes").named("n1").object(makeNode("n2")), reason: "does not match"},
	"delete own node denied":          {attrs: req(node1, "delete", "nodes").named("n1")},

	// Its NodeResourceSlices.
	"create own slice":             {attrs: req(node1, "create", sliceRes).object(makeSlice("s", "n1")), allowed: true},
	"update own slice":             {attrs: req(node1, "update", sliceRes).named("s").object(makeSlice("s", "n1")).oldObject(makeSlice("s", "n1")), allowed: true},
	"delete own slice":             {attrs: req(node1, "delete", sliceRes).named("s").oldObject(makeSlice("s", "n1")), allowed: true},
	"create other node's slice":    {attrs: req(node1, "create", sliceRes).object(makeSlice("s", "n2")), reason: `node "n1" may only write NodeResourceSlices with spec.nodeName "n1"`},
	"update other node's slice":    {attrs: req(node1, "update", sliceRes).named("s").object(makeSlice("s", "n2")).oldObject(makeSlice("s", "n2"))},
	"move own slice away":          {attrs: req(node1, "update", sliceRes).named("s").object(makeSlice("s", "n2")).oldObject(makeSlice("s", "n1"))},
	"take over other node's slice": {attrs: req(node1, "patch", sliceRes).named("s").object(makeSlice("s", "n1")).oldObject(makeSlice("s", "n2")), reason: `not "n2"`},
	"delete other node's slice":    {attrs: req(node1, "delete", sliceRes).named("s").oldObject(makeSlice("s", "n2"))},
	"update slice without old":     {attrs: req(node1, "update", sliceRes).named("s").object(makeSlice("s", "n1")), reason: "no object given"},
	"create slice without object":  {attrs: req(node1, "create", sliceRes)},
	"deletecollection slices":      {attrs: req(node1, "deletecollection", sliceRes)},
	"slice of wrong type":          {attrs: req(node1, "create", sliceRes).object(makeNode("n1")), reason: "unexpected object type"},

	// Events.
	"create event anywhere": {attrs: req(node1, "create", "events").inNS("kube-system"), allowed: true},
	"patch event":           {attrs: req(node1, "patch", "events").named("e"), allowed: true},
	"delete event denied":   {attrs: req(node1, "delete", "events").named("e")},

	// Its pods.
	"update bound pod status":          {attrs: req(node1, "update", "pods/status").named("p1").oldObject(makePod("p1").node("n1").obj()), allowed: true},
	"update bound pod status (lookup)": {attrs: req(node1, "patch", "pods/status").named("p1"), allowed: true},
	"delete bound pod":                 {attrs: req(node1, "delete", "pods").named("p1").oldObject(makePod("p1").node("n1").obj()), allowed: true},
	"update other pod status":          {attrs: req(node1, "update", "pods/status").named("p2").oldObject(makePod("p2").node("n2").obj()), reason: `pod default/p2 has "n2"`},
	"update other pod status (lookup)": {attrs: req(node1, "update", "pods/status").named("p2")},
	"update unbound pod status":        {attrs: req(node1, "update", "pods/status").named("p4")},
	"update missing pod status":        {attrs: req(node1, "update", "pods/status").named("nope"), reason: "not found"},
	"delete other pod":                 {attrs: req(node1, "delete", "pods").named("p2")},
	"create pod denied":                {attrs: req(node1, "create", "pods").object(makePod("x").node("n1").obj())},
	"update pod spec denied":           {attrs: req(node1, "update", "pods").named("p1")},
	"bind pod denied":                  {attrs: req(node1, "create", "pods/binding").named("p4")},

	// Claims and everything else.
	"write claim status denied": {attrs: req(node1, "update", "resourceclaims.resource.k8s.io/status").named("gpu-claim"), reason: "nodes write only"},
	"update claim denied":       {attrs: req(node1, "update", "resourceclaims.resource.k8s.io").named("gpu-claim")},
	"create claim denied":       {attrs: req(node1, "create", "resourceclaims.resource.k8s.io")},
	"create class params":       {attrs: req(node1, "create", "resourceclassparameters.resource.k8s.io").object(classParams("n1"))},
	"delete namespace denied":   {attrs: req(node1, "delete", "namespaces").named(testNS)},
}

func TestAuthorizeNode(t *testing.T) { runAuthCases(t, nodeCases) }
