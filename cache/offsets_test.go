package cache

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestOffsetsOverwriteAndDelete(t *testing.T) {
	tab := NewOffsets()
	k0 := TopicPartition{"orders", 0}
	k1 := TopicPartition{"orders", 1}
	tab.Update(func(w OffsetsWriter) {
		w.Put("g", 1, k0, Offset{Offset: 10, CommitTime: 100})
		w.Put("g", 2, k0, Offset{Offset: 20, CommitTime: 200})
		w.Put("g", 3, k1, Offset{Offset: 5, CommitTime: 150})
		w.SetGeneration("g", 4)
		w.SetGeneration("g", 2) // generations only grow
	})
	if v, ok := tab.Get("g", "orders", 0); !ok || v.Offset != 20 {
		t.Fatalf("Get = %v %v, want the newer value 20", v, ok)
	}
	info, ok := tab.Info("g")
	if !ok || info.Version != 3 || info.LastCommit != 200 || info.Generation != 4 || info.Offsets != 2 {
		t.Fatalf("Info = %+v", info)
	}
	entries, _, _ := tab.Group("g", nil)
	if len(entries) != 2 || entries[0].Partition != 0 || entries[1].Partition != 1 {
		t.Fatalf("Group not sorted: %v", entries)
	}
	if keys, groups := tab.Len(); keys != 2 || groups != 1 {
		t.Fatalf("Len = %d %d", keys, groups)
	}
	tab.Update(func(w OffsetsWriter) {
		w.Delete("g", 4, k0)
		w.Delete("g", 5, TopicPartition{"missing", 0}) // no-op
	})
	if info, _ := tab.Info("g"); info.Version != 4 || info.Offsets != 1 {
		t.Fatalf("after delete Info = %+v", info)
	}
	tab.Update(func(w OffsetsWriter) { w.Delete("g", 6, k1) })
	if _, ok := tab.Info("g"); ok {
		t.Fatal("a group without offsets still exists")
	}
	if keys, groups := tab.Len(); keys != 0 || groups != 0 {
		t.Fatalf("Len = %d %d after deleting everything", keys, groups)
	}
}

func TestDeleteGroupAndGroups(t *testing.T) {
	tab := NewOffsets()
	tab.Update(func(w OffsetsWriter) {
		for _, g := range []string{"b", "a", "c"} {
			w.Put(g, 1, TopicPartition{"t", 0}, Offset{})
			w.Put(g, 1, TopicPartition{"t", 1}, Offset{})
		}
		w.DeleteGroup("b")
		w.DeleteGroup("missing")
	})
	got := tab.Groups(nil)
	slices.Sort(got)
	if !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("Groups = %v", got)
	}
	if keys, _ := tab.Len(); keys != 4 {
		t.Fatalf("keys = %d, want 4", keys)
	}
}

func TestGroupNameReusesTheTablesString(t *testing.T) {
	tab := NewOffsets()
	tab.Update(func(w OffsetsWriter) {
		w.Put("group", 1, TopicPartition{"t", 0}, Offset{})
		b := []byte("group")
		if n := testing.AllocsPerRun(10, func() { _ = w.GroupName(b) }); n != 0 {
			t.Errorf("GroupName of a known group allocates %v times", n)
		}
	})
}

// TestConcurrentReaders runs readers against a writer under the race
// detector: a reader sees a whole batch or none of it.
func TestConcurrentReaders(t *testing.T) {
	tab := NewOffsets()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				entries, _, ok := tab.Group("g", nil)
				if ok && (len(entries) != 2 || entries[0].Offset.Offset != entries[1].Offset.Offset) {
					t.Error("a batch was seen half applied")
					return
				}
			}
		}()
	}
	for i := range int64(2000) {
		tab.Update(func(w OffsetsWriter) {
			w.Put("g", uint64(i), TopicPartition{"t", 0}, Offset{Offset: i})
			w.Put("g", uint64(i), TopicPartition{"t", 1}, Offset{Offset: i})
		})
	}
	close(stop)
	wg.Wait()
}

func BenchmarkGet(b *testing.B) {
	tab := NewOffsets()
	tab.Update(func(w OffsetsWriter) {
		w.Put("payments", 1, TopicPartition{"orders", 3}, Offset{Offset: 42})
	})
	b.ReportAllocs()
	for b.Loop() {
		tab.Get("payments", "orders", 3)
	}
}

func TestIdleGroups(t *testing.T) {
	tab := NewOffsets()
	tab.Update(func(w OffsetsWriter) {
		w.Put("old", 1, TopicPartition{"t", 0}, Offset{CommitTime: 100})
		w.Put("mixed", 2, TopicPartition{"t", 0}, Offset{CommitTime: 100})
		w.Put("mixed", 3, TopicPartition{"t", 1}, Offset{CommitTime: 900}) // one active partition keeps the group
		w.Put("new", 4, TopicPartition{"t", 0}, Offset{CommitTime: 900})
	})
	if got := tab.IdleGroups(500, 10, nil); !slices.Equal(got, []string{"old"}) {
		t.Fatalf("IdleGroups = %v, want [old]", got)
	}
	if got := tab.IdleGroups(1000, 2, nil); len(got) != 2 {
		t.Fatalf("IdleGroups with limit 2 = %v", got)
	}
}

func TestOffsetsTopic(t *testing.T) {
	tab := NewOffsets()
	tab.Update(func(w OffsetsWriter) {
		w.Put("g1", 1, TopicPartition{"T", 0}, Offset{Offset: 5})
		w.Put("g1", 1, TopicPartition{"U", 0}, Offset{Offset: 6})
		w.Put("g2", 2, TopicPartition{"T", 3}, Offset{Offset: 7})
	})
	got := tab.Topic("T", nil)
	slices.SortFunc(got, func(a, b GroupOffset) int { return strings.Compare(a.Group, b.Group) })
	want := []GroupOffset{{"g1", 0, 5}, {"g2", 3, 7}}
	if !slices.Equal(got, want) {
		t.Errorf("Topic(T) = %+v, want %+v", got, want)
	}
	if got := tab.Topic("V", nil); len(got) != 0 {
		t.Errorf("Topic(V) = %+v", got)
	}
}

// TestPartitionLayouts puts partitions densely, sparsely (far beyond the
// live count), negatively and out of order, and checks that every one is
// found, listed in order, deleted and counted, whichever layout holds it.
func TestPartitionLayouts(t *testing.T) {
	tab := NewOffsets()
	parts := []int32{5000, 3, 0, -7, 1 << 30, 1, 40, 2, 100}
	tab.Update(func(w OffsetsWriter) {
		for i, p := range parts {
			w.Put("g", uint64(i+1), TopicPartition{"t", p}, Offset{Offset: int64(p), Metadata: "m"})
		}
		// Enough dense partitions to pull 40 and 100 out of the sparse map.
		for p := int32(4); p < 60; p++ {
			w.Put("g", 20, TopicPartition{"t", p}, Offset{Offset: int64(p)})
		}
	})
	want := append([]int32{-7, 0, 1, 2, 3}, 100, 5000, 1<<30)
	for p := int32(4); p < 60; p++ {
		want = append(want, p)
	}
	slices.Sort(want)
	entries, info, ok := tab.Group("g", nil)
	if !ok || info.Offsets != len(want) || len(entries) != len(want) {
		t.Fatalf("Group: %d entries, info %+v; want %d", len(entries), info, len(want))
	}
	for i, e := range entries {
		if e.Partition != want[i] || e.Offset.Offset != int64(want[i]) {
			t.Fatalf("entry %d = %+v, want partition %d", i, e, want[i])
		}
		if v, ok := tab.Get("g", "t", e.Partition); !ok || v.Offset != int64(e.Partition) {
			t.Fatalf("Get(%d) = %v %v", e.Partition, v, ok)
		}
	}
	for _, p := range []int32{-1, 60, 99, 4999, 1<<31 - 1} {
		if v, ok := tab.Get("g", "t", p); ok {
			t.Fatalf("Get(%d) = %v of a partition never put", p, v)
		}
	}
	tab.Update(func(w OffsetsWriter) {
		for _, p := range want {
			if !w.Has("g", TopicPartition{"t", p}) {
				t.Fatalf("Has(%d) is false", p)
			}
			w.Delete("g", 30, TopicPartition{"t", p})
			w.Delete("g", 31, TopicPartition{"t", p}) // twice: a no-op
		}
	})
	if keys, groups := tab.Len(); keys != 0 || groups != 0 {
		t.Fatalf("Len = %d %d after deleting every partition", keys, groups)
	}
	if _, _, topics := tab.Sizes(); topics != 0 {
		t.Fatalf("%d group and topic pairs left after deleting every partition", topics)
	}
}

// TestSparsePartitionInsideTheDenseArray puts a partition in the sparse
// map whose number lies within the dense slots' spare capacity (the live
// count fell after they grew), where a fetch's lookup sees an empty slot:
// the fetch must still find it, and the partitions the dense slots grow
// over later too.
func TestSparsePartitionInsideTheDenseArray(t *testing.T) {
	tab := NewOffsets()
	tab.Update(func(w OffsetsWriter) {
		for p := int32(0); p < 40; p++ { // dense: 40 slots, capacity 64
			w.Put("g", 1, TopicPartition{"t", p}, Offset{Offset: int64(p)})
		}
		for p := int32(1); p < 40; p++ {
			w.Delete("g", 2, TopicPartition{"t", p})
		}
		w.Put("g", 3, TopicPartition{"t", 50}, Offset{Offset: 50}) // far past the one live: sparse
	})
	for _, p := range []int32{0, 50} {
		if v, ok := tab.Get("g", "t", p); !ok || v.Offset != int64(p) {
			t.Fatalf("Get(%d) = %v %v", p, v, ok)
		}
	}
	if v, ok := tab.Get("g", "t", 45); ok {
		t.Fatalf("Get(45) = %v of a partition never put", v)
	}
	tab.Update(func(w OffsetsWriter) {
		for p := int32(1); p < 60; p++ { // the dense slots grow over 50, in place
			if p != 50 {
				w.Put("g", 4, TopicPartition{"t", p}, Offset{Offset: int64(p)})
			}
		}
	})
	for p := int32(0); p < 60; p++ {
		if v, ok := tab.Get("g", "t", p); !ok || v.Offset != int64(p) {
			t.Fatalf("Get(%d) = %v %v after the dense slots grew", p, v, ok)
		}
	}
}

// TestTopicsOfAGroup checks that a group's topics are listed in name order
// and that a topic left without partitions is gone from the group.
func TestTopicsOfAGroup(t *testing.T) {
	tab := NewOffsets()
	tab.Update(func(w OffsetsWriter) {
		for _, topic := range []string{"c", "a", "b"} {
			tw := w.Topic("g", topic, 7)
			tw.Reserve(2, 2)
			tw.Put(1, Offset{Offset: 1})
			tw.Put(0, Offset{Offset: 0})
		}
		w.Delete("g", 8, TopicPartition{"b", 0})
		w.Delete("g", 9, TopicPartition{"b", 1})
	})
	entries, info, _ := tab.Group("g", nil)
	var got []string
	for _, e := range entries {
		got = append(got, fmt.Sprintf("%s/%d", e.Topic, e.Partition))
	}
	if want := []string{"a/0", "a/1", "c/0", "c/1"}; !slices.Equal(got, want) || info.Version != 9 || info.Offsets != 4 {
		t.Fatalf("Group = %v, %+v; want %v at version 9", got, info, want)
	}
	if keys, groups, topics := tab.Sizes(); keys != 4 || groups != 1 || topics != 2 {
		t.Fatalf("Sizes = %d %d %d", keys, groups, topics)
	}
}

func TestGetDoesNotAllocate(t *testing.T) {
	tab := NewOffsets()
	tab.Update(func(w OffsetsWriter) {
		w.Put("payments", 1, TopicPartition{"orders", 3}, Offset{Offset: 42, Metadata: "m"})
	})
	if n := testing.AllocsPerRun(100, func() { tab.Get("payments", "orders", 3) }); n != 0 {
		t.Fatalf("Get allocates %v times", n)
	}
}
