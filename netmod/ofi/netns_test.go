//go:build ofi

package ofi

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestTwoNamespaces runs the two endpoints of TestTwoProcesses as two
// simulated nodes: network namespaces joined by a veth pair, created here
// and removed afterwards. Only loopback addresses are used: each namespace
// keeps 127.0.0.1 on its lo and gives its veth end 127.0.N.1/24, with
// route_localnet so that 127/8 may cross the link.
func TestTwoNamespaces(t *testing.T) {
	if inChild(t.Name()) {
		var err error
		if os.Getenv(envRole) == "send" {
			err = sendChild()
		} else {
			err = echoChild()
		}
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("creating network namespaces needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("ip (Debian package iproute2) is not installed: cannot create network namespaces")
	}
	nodes := twoNodes(t)
	a := startChild(t, []string{"ip", "netns", "exec", nodes[0].ns}, envRole+"=send", envNode+"="+nodes[0].addr)
	b := startChild(t, []string{"ip", "netns", "exec", nodes[1].ns}, envRole+"=echo", envNode+"="+nodes[1].addr)
	// Relay the addresses: each child sends its own, then reads the other's.
	la, err := readLine(a.in)
	if err != nil {
		t.Fatalf("address of the sender: %v", err)
	}
	lb, err := readLine(b.in)
	if err != nil {
		t.Fatalf("address of the echo: %v", err)
	}
	if err := sendLine(a.out, "%s", lb); err != nil {
		t.Fatal(err)
	}
	if err := sendLine(b.out, "%s", la); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*child{"sender": a, "echo": b} {
		if err := c.cmd.Wait(); err != nil {
			t.Fatalf("%s in its namespace: %v", name, err)
		}
	}
}

const envRole = "KNEMESIS_OFI_ROLE"

func sendChild() error {
	in, out := parentLink()
	e, err := Open(Config{Provider: testProvider, Node: childNode(), HeaderSize: testHdr})
	if err != nil {
		return err
	}
	defer e.Close()
	peer, err := exchange(e, in, out, "echo node")
	if err != nil {
		return err
	}
	if got := e.peers[peer].address; got == "" || !strings.Contains(got, "127.0.2.1:") {
		return fmt.Errorf("the echo node's address is %q, not on the other namespace's 127.0.2.1", got)
	}
	return sendSizes(e, peer)
}

type simNode struct{ ns, addr string }

// twoNodes creates two namespaces joined by a veth pair and registers
// their removal (which removes the veth too).
func twoNodes(t *testing.T) [2]simNode {
	id := os.Getpid() % 100000
	var n [2]simNode
	var links [2]string
	for i := range n {
		n[i] = simNode{ns: fmt.Sprintf("kn-ofi-%d-%d", id, i), addr: fmt.Sprintf("127.0.%d.1", i+1)}
		links[i] = fmt.Sprintf("knv%d%c", id, 'a'+i)
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
