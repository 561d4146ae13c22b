//go:build ofi

package ofi

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/knemesis/knemesis/netmod/internal/netnstest"
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
		t.Skip("lacks root: creating network namespaces needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("lacks iproute2: ip (Debian package iproute2) is not installed: cannot create network namespaces")
	}
	nodes := netnstest.TwoNodes(t, "ofi")
	a := startChild(t, []string{"ip", "netns", "exec", nodes[0].NS}, envRole+"=send", envNode+"="+nodes[0].Addr)
	b := startChild(t, []string{"ip", "netns", "exec", nodes[1].NS}, envRole+"=echo", envNode+"="+nodes[1].Addr)
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
