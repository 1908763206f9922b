package statictopic

import (
	"encoding/json"
	"errors"
	"os"
	"testing"
)

// rocketMQRemapped is testdata/rocketmq_remapped.json: a static topic as
// RocketMQ's brokers hold it right after remappingStaticTopic moved logic
// queue 0 from broker-a to broker-b and the admin tool decided the new
// leader's logic offset: the old leader is still open (endOffset -1), times
// unset (-1), the global scope spelled "__global__", no version field.
func rocketMQRemapped(t *testing.T) []Detail {
	t.Helper()
	b, err := os.ReadFile("testdata/rocketmq_remapped.json")
	if err != nil {
		t.Fatal(err)
	}
	var details []Detail
	if err := json.Unmarshal(b, &details); err != nil {
		t.Fatal(err)
	}
	return details
}

func TestImportRocketMQOpenOldLeader(t *testing.T) {
	m, err := Import(rocketMQRemapped(t))
	if err != nil {
		t.Fatal(err)
	}
	if m.Scope != "global" || m.Bname != "__logic__global" || m.Version != MappingVersion || len(m.Queues[0]) != 2 {
		t.Fatalf("imported %+v", m)
	}
	// The open old leader holds logic offsets up to the new leader's start.
	for _, tt := range []struct {
		logic    int64
		broker   string
		physical int64
	}{{0, "broker-a", 0}, {19999, "broker-a", 19999}, {20000, "broker-b", 0}, {20007, "broker-b", 7}} {
		it, phys, err := m.ToPhysical(0, tt.logic)
		if err != nil || it.Broker != tt.broker || phys != tt.physical {
			t.Errorf("ToPhysical(0, %d) = %s %d %v, want %s %d", tt.logic, it.Broker, phys, err, tt.broker, tt.physical)
		}
	}
	if q, logic, err := m.ToLogic("broker-a", 0, 500); err != nil || q != 0 || logic != 500 {
		t.Errorf("ToLogic(broker-a, 0, 500) = %d %d %v", q, logic, err)
	}
	if _, _, err := m.ToLogic("broker-a", 0, 20000); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("ToLogic past the old leader's bound = %v, want ErrOutOfRange", err)
	}
	// Round trip: export, JSON, import.
	b, err := json.Marshal(Export(m))
	if err != nil {
		t.Fatal(err)
	}
	var again []Detail
	if err := json.Unmarshal(b, &again); err != nil {
		t.Fatal(err)
	}
	back, err := Import(again)
	if err != nil {
		t.Fatal(err)
	}
	if !back.Equal(m) {
		t.Errorf("round trip changed the mapping:\n%+v\n%+v", m, back)
	}
	// Sealing the old leader later is allowed history.
	sealed := m.Clone()
	sealed.Epoch += 1000
	sealed.Queues[0][0].EndOffset = 12345
	if err := sealed.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := CheckHistory(m, sealed); err != nil {
		t.Errorf("sealing the open old leader: %v", err)
	}
}

func TestExportRoundTrip(t *testing.T) {
	m := twiceMoved(t)
	m, _, err := Trim(m, nil, 12345, m.Epoch+1000)
	if err != nil {
		t.Fatal(err)
	}
	details := Export(m)
	if len(details) != 3 || details[0].Bname != "b1" || details[0].Scope != "clusterA" {
		t.Fatalf("export = %+v", details)
	}
	back, err := Import(details)
	if err != nil {
		t.Fatal(err)
	}
	if !back.Equal(m) {
		t.Errorf("round trip changed the mapping:\n%+v\n%+v", m, back)
	}
}

func TestImportRejects(t *testing.T) {
	base := func() []Detail { return rocketMQRemapped(t) }
	tests := []struct {
		name   string
		mutate func(d []Detail) []Detail
	}{
		{"none", func([]Detail) []Detail { return nil }},
		{"epochs differ", func(d []Detail) []Detail { d[1].Epoch++; return d }},
		{"totals differ", func(d []Detail) []Detail { d[1].TotalQueues = 3; return d }},
		{"topics differ", func(d []Detail) []Detail { d[1].Topic = "Other"; return d }},
		{"scopes differ", func(d []Detail) []Detail { d[1].Scope = "clusterA"; return d }},
		{"dirty", func(d []Detail) []Detail { d[0].Dirty = true; return d }},
		{"unknown version", func(d []Detail) []Detail { d[0].Version = "9"; return d }},
		{"a queue missing", func(d []Detail) []Detail { return d[1:] }},
		{"a queue led twice", func(d []Detail) []Detail { return append(d, d[1]) }},
		{"currIdMap wrong", func(d []Detail) []Detail { d[1].CurrIDMap[0] = 5; return d }},
		{"logic broker as bname", func(d []Detail) []Detail { d[0].Bname = "__logic__global"; return d }},
		{"broken items", func(d []Detail) []Detail { d[0].HostedQueues[1][0].Gen = -1; return d }},
	}
	for _, tt := range tests {
		if _, err := Import(tt.mutate(base())); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Import = %v, want ErrInvalid", tt.name, err)
		}
	}
}

func FuzzImport(f *testing.F) {
	b, err := os.ReadFile("testdata/rocketmq_remapped.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`[{"topic":"T","scope":"c1","totalQueues":1,"bname":"b","epoch":1,"hostedQueues":{"0":[{"bname":"b","endOffset":-1}]}}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var details []Detail
		if json.Unmarshal(data, &details) != nil {
			return
		}
		m, err := Import(details)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Import error not ErrInvalid: %v", err)
			}
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("Import returned an invalid mapping: %v", err)
		}
		back, err := Import(Export(m))
		if err != nil || !back.Equal(m) {
			t.Fatalf("export does not import back: %v\n%+v\n%+v", err, m, back)
		}
	})
}
