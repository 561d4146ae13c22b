//go:build ofi

package ofinet

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

type simNode struct{ ns, addr string }

// twoNodes creates two namespaces joined by a veth pair and registers
// their removal (which removes the veth too).
func twoNodes(t *testing.T) [2]simNode {
	id := os.Getpid() % 100000
	var n [2]simNode
	var links [2]string
	for i := range n {
		n[i] = simNode{ns: fmt.Sprintf("kn-net-%d-%d", id, i), addr: fmt.Sprintf("127.0.%d.1", i+1)}
		links[i] = fmt.Sprintf("knw%d%c", id, 'a'+i)
		if err := run("ip", "netns", "add", n[i].ns); err != nil {
			t.Fatal(err)
		}
		ns := n[i].ns
		t.Cleanup(func() { _ = run("ip", "netns", "del", ns) })
	}
	cmds := [][]string{{"ip", "link", "add", links[0], "netns", n[0].ns, "type", "veth", "peer", "name", links[1], "netns", n[1].ns}}
	for i := range n {
		ip := []string{"ip", "-n", n[i].ns}
		other := fmt.Sprintf("127.0.%d.0/24", 2-i)
		cmds = append(cmds,
			append(ip, "link", "set", "lo", "up"),
			// 127/8 is lo's whole: keep only 127.0.0.1 there.
			append(ip, "route", "del", "local", "127.0.0.0/8", "dev", "lo", "table", "local"),
			[]string{"ip", "netns", "exec", n[i].ns, "sysctl", "-qw", "net.ipv4.conf.all.route_localnet=1"},
			[]string{"ip", "netns", "exec", n[i].ns, "sysctl", "-qw", "net.ipv4.conf." + links[i] + ".route_localnet=1"},
			append(ip, "addr", "add", n[i].addr+"/24", "dev", links[i]),
			append(ip, "link", "set", links[i], "up"),
			append(ip, "route", "add", other, "dev", links[i]),
		)
	}
	for _, c := range cmds {
		if err := run(c...); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

func run(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}
