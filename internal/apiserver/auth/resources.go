package auth

// Resource is a built-in resource the rules were written for, with the
// subresources the API server serves for it.
type Resource struct {
	Group, Resource string
	Namespaced      bool
	Subresources    []string
}

// Resources lists every built-in resource. The API server serves exactly
// these (a test checks it against its registry), and the role matrix test
// decides, for each of them, every verb of every role: a resource added to
// the server without a decision for each role fails those tests.
var Resources = []Resource{
	{"", "namespaces", false, []string{"status", "finalize"}},
	{"", "nodes", false, []string{"status"}},
	{"", "pods", true, []string{"status", "binding", "log"}},
	{"", "events", true, nil},
	{"", "resourcequotas", true, []string{"status"}},
	{grClasses.group, "resourceclasses", false, nil},
	{grClaims.group, "resourceclaims", true, []string{"status"}},
	{grClaimTemplates.group, "resourceclaimtemplates", true, nil},
	{grSchedContexts.group, "podschedulingcontexts", true, []string{"status"}},
	{grSlices.group, "noderesourceslices", false, nil},
	{grClaimParameters.group, "resourceclaimparameters", true, nil},
	{grClassParameters.group, "resourceclassparameters", false, nil},
	{grDeviceClasses.group, "deviceclasses", false, nil},
	{grResourceSlices.group, "resourceslices", false, nil},
	{grDeviceTaintRules.group, "devicetaintrules", false, []string{"status"}},
	{"apiextensions.k8s.io", "customresourcedefinitions", false, []string{"status"}},
	{grLeases.group, "leases", true, nil},
}
