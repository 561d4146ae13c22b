package threshold

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// FuzzParseTuning: whatever a tuning file holds, parseTuning refuses it or
// returns tables that keep the promises Build relies on (rules present,
// known LMT backends, sizes ascending from 0, lmt_min not negative), and
// that survive being written and read again unchanged. The seeds run
// under plain go test.
func FuzzParseTuning(f *testing.F) {
	here := testMachine()
	good := &TuningFile{Version: TuningVersion, Machine: here, Measured: time.Date(2026, 11, 22, 5, 0, 0, 0, time.UTC)}
	good.Put(TunedTable{SharedCache: true, Concurrent: 1, Pair: [2]int{0, 1}, LMTMin: 32 << 10,
		Rules:  []TunedRule{{From: 32 << 10, Backend: Shm}, {From: 32 << 20, Backend: CMA}},
		Points: []Point{{Size: 4096, Backend: Shm, BytesPerSec: 1.5e9}}})
	good.Put(TunedTable{Concurrent: 2, Rules: []TunedRule{{From: 0, Backend: CMASplit}}})
	b, err := json.MarshalIndent(good, "", "  ")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add(b[:len(b)/2])
	f.Add(append(append([]byte(nil), b...), "{}"...))
	f.Add(bytes.Replace(b, []byte(`"shm"`), []byte(`"eager"`), 1))
	f.Add(bytes.Replace(b, []byte(`"from": 33554432`), []byte(`"from": 1`), 1))
	f.Add(bytes.Replace(b, []byte(`"version": 1`), []byte(`"version": 2`), 1))
	f.Add([]byte(`{"version": 1, "bogus": 1}`))
	f.Add([]byte(""))
	f.Add([]byte("version = 1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tf, err := parseTuning(data, "fuzz.json", here)
		if err != nil {
			return
		}
		if tf.Version != TuningVersion || len(tf.Machine.Differences(here)) != 0 {
			t.Fatalf("accepted version %d of machine %+v", tf.Version, tf.Machine)
		}
		for i, tt := range tf.Tables {
			if len(tt.Rules) == 0 || tt.LMTMin < 0 {
				t.Fatalf("table %d accepted with %d rules, lmt_min %d", i, len(tt.Rules), tt.LMTMin)
			}
			for j, r := range tt.Rules {
				if !r.Backend.Valid() || r.Backend == Eager || r.From < 0 || (j > 0 && r.From <= tt.Rules[j-1].From) {
					t.Fatalf("table %d rule %d accepted: %+v after %+v", i, j, r, tt.Rules[max(j-1, 0)])
				}
			}
		}
		again, err := json.Marshal(tf)
		if err != nil {
			t.Fatal(err)
		}
		tf2, err := parseTuning(again, "fuzz.json", here)
		if err != nil {
			t.Fatalf("a parsed file, written again, is refused: %v\n%s", err, again)
		}
		if twice, _ := json.Marshal(tf2); !bytes.Equal(twice, again) {
			t.Fatalf("round trip changed the file:\n%s\n%s", again, twice)
		}
	})
}
