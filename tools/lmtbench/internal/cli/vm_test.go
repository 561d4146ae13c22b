package cli

import (
	"io"
	"slices"
	"testing"
)

func TestGuestArgsDropVMAndFillTheGuestDefaults(t *testing.T) {
	for _, tc := range []struct {
		args, want []string
	}{
		{[]string{"--vm", "pingpong", "--sizes", "64K"},
			[]string{"pingpong", "--sizes", "64K", "--backends", "knem,cma,vmsplice,shm,pipe", "--placement-probe", "none", "--progress=false"}},
		{[]string{"pingpong", "-vm=true", "--backends=knem", "--placement-probe", "/p", "--progress"},
			[]string{"pingpong", "--backends=knem", "--placement-probe", "/p", "--progress"}},
		// latency measures the queue and fastbox, which take no backend list.
		{[]string{"latency", "--vm"}, []string{"latency", "--placement-probe", "none", "--progress=false"}},
	} {
		o, err := parse(tc.args, io.Discard)
		if err != nil {
			t.Fatalf("parse %q: %v", tc.args, err)
		}
		if !o.vm {
			t.Errorf("parse %q: --vm not set", tc.args)
		}
		if got := guestArgs(o, tc.args); !slices.Equal(got, tc.want) {
			t.Errorf("guestArgs(%q) = %q; want %q", tc.args, got, tc.want)
		}
	}
}
