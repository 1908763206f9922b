package partitioner

import (
	"errors"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// The vectors pin the on-disk mapping: if any of them changes, existing data
// directories would be read from the wrong partitions.
func TestVectors(t *testing.T) {
	vectors := []struct {
		name string
		n    int
		want int
	}{
		{"", 16, 9},
		{"payments", 16, 8},
		{"orders-consumer", 16, 2},
		{"g-000001", 16, 4},
		{"g-000001", 7, 4},
		{"TopicTest", 16, 10},
		{"TopicTest", 1, 0},
		{"群组", 64, 23},
	}
	for _, v := range vectors {
		p, err := New(v.n)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Group(v.name); got != v.want {
			t.Errorf("Group(%q) over %d = %d, want %d", v.name, v.n, got, v.want)
		}
		if got := p.Topic(v.name); got != v.want {
			t.Errorf("Topic(%q) over %d = %d, want %d", v.name, v.n, got, v.want)
		}
	}
}

// TestHashIsXXH64 checks the hash against the published XXH64 vectors (seed
// 0), so a dependency upgrade cannot swap the function underneath the format.
func TestHashIsXXH64(t *testing.T) {
	for in, want := range map[string]uint64{
		"":    0xef46db3751d8e999,
		"abc": 0x44bc2cf5ad770999,
	} {
		if got := xxhash.Sum64String(in); got != want {
			t.Errorf("xxhash64(%q) = %#x, want %#x", in, got, want)
		}
	}
}

func TestNewRejectsBadCounts(t *testing.T) {
	for _, n := range []int{-1, 0, MaxPartitions + 1} {
		if _, err := New(n); !errors.Is(err, ErrInvalid) {
			t.Errorf("New(%d) = %v, want ErrInvalid", n, err)
		}
	}
}

func TestSpread(t *testing.T) {
	p, _ := New(16)
	counts := make([]int, 16)
	for i := range 16000 {
		counts[p.Group("g-"+string(rune('a'+i%26))+string(rune(i)))]++
	}
	for i, c := range counts {
		if c < 700 || c > 1300 {
			t.Errorf("partition %d got %d of 16000 groups; hash is badly skewed", i, c)
		}
	}
}

func BenchmarkGroup(b *testing.B) {
	p, _ := New(16)
	b.ReportAllocs()
	for b.Loop() {
		_ = p.Group("orders-consumer-group")
	}
}
