// Package netnstest simulates two nodes on one machine for the network
// modules' tests: two network namespaces joined by a veth pair, each with
// 127.0.0.1 on its lo and 127.0.N.1/24 on its veth end, with
// route_localnet so that 127/8 may cross the link. It needs root and ip
// (Debian package iproute2).
package netnstest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Node is one simulated node: its namespace and its address on the link.
type Node struct{ NS, Addr string }

// TwoNodes creates two namespaces named after prefix and this process,
// joined by a veth pair, and registers their removal with t (which
// removes the veth too).
func TwoNodes(t *testing.T, prefix string) [2]Node {
	t.Helper()
	id := os.Getpid() % 100000
	var n [2]Node
	var links [2]string
	for i := range n {
		n[i] = Node{NS: fmt.Sprintf("kn-%s-%d-%d", prefix, id, i), Addr: fmt.Sprintf("127.0.%d.1", i+1)}
		links[i] = fmt.Sprintf("k%s%d%c", prefix[:1], id, 'a'+i)
		if err := Run("ip", "netns", "add", n[i].NS); err != nil {
			t.Fatal(err)
		}
		ns := n[i].NS
		t.Cleanup(func() { _ = Run("ip", "netns", "del", ns) })
	}
	cmds := [][]string{{"ip", "link", "add", links[0], "netns", n[0].NS, "type", "veth", "peer", "name", links[1], "netns", n[1].NS}}
	for i := range n {
		ip := []string{"ip", "-n", n[i].NS}
		other := fmt.Sprintf("127.0.%d.0/24", 2-i)
		cmds = append(cmds,
			append(ip, "link", "set", "lo", "up"),
			// 127/8 is lo's whole: keep only 127.0.0.1 there.
			append(ip, "route", "del", "local", "127.0.0.0/8", "dev", "lo", "table", "local"),
			[]string{"ip", "netns", "exec", n[i].NS, "sysctl", "-qw", "net.ipv4.conf.all.route_localnet=1"},
			[]string{"ip", "netns", "exec", n[i].NS, "sysctl", "-qw", "net.ipv4.conf." + links[i] + ".route_localnet=1"},
			append(ip, "addr", "add", n[i].Addr+"/24", "dev", links[i]),
			append(ip, "link", "set", links[i], "up"),
			append(ip, "route", "add", other, "dev", links[i]),
		)
	}
	for _, c := range cmds {
		if err := Run(c...); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// Run runs a command and returns an error with its output when it fails.
func Run(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}
