package ofinet

import "strings"

// Provider is a libfabric provider the network module runs over: its name
// as fi_getinfo takes it (ofi.Config.Provider), and where it serves.
type Provider struct {
	Name  string
	Where string
}

// DefaultProvider is the provider a job uses unless told otherwise: TCP
// with the RxM utility provider, which any Ethernet and the loopback carry.
const DefaultProvider = "tcp;ofi_rxm"

// Providers is the one table of the providers the module is known to run
// over; every other list of them (lmtbench's help, netbench's flag) derives
// from it.
var Providers = []Provider{
	{DefaultProvider, "any Ethernet, and the loopback"},
	{"verbs;ofi_rxm", "InfiniBand and RoCE"},
	{"efa", "AWS Elastic Fabric Adapter"},
	{"cxi", "HPE Slingshot"},
}

// ProviderNames lists the names of Providers, comma-separated, for help
// texts.
func ProviderNames() string {
	names := make([]string, len(Providers))
	for i, p := range Providers {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}
