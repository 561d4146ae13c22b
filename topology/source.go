package topology

// Source says where a cache's description came from, so that a surprising
// threshold can be traced to what the machine reported or to a person's
// correction.
type Source string

// Where cache descriptions come from, in the order [Detect] tries them.
const (
	SourceSysfs    Source = "sysfs"
	SourceCPUID    Source = "cpuid"
	SourceOverride Source = "override"
)
