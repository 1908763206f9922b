package kafka

import (
	"reflect"
	"testing"
)

func TestAssignors(t *testing.T) {
	both := []string{"a", "b"}
	tests := []struct {
		name       string
		assignor   string
		members    []assignee
		partitions map[string]int32
		want       map[string]partitionsOf
	}{
		{
			name:     "range gives contiguous ranges, the first members one more",
			assignor: assignorRange,
			members:  []assignee{{id: "m2", subscribed: both}, {id: "m1", subscribed: both}},
			partitions: map[string]int32{
				"a": 3, "b": 3,
			},
			want: map[string]partitionsOf{"m1": {"a": {0, 1}, "b": {0, 1}}, "m2": {"a": {2}, "b": {2}}},
		},
		{
			name:       "range over a topic only one member subscribes to",
			assignor:   assignorRange,
			members:    []assignee{{id: "m1", subscribed: []string{"a"}}, {id: "m2", subscribed: both}},
			partitions: map[string]int32{"a": 2, "b": 2},
			want:       map[string]partitionsOf{"m1": {"a": {0}}, "m2": {"a": {1}, "b": {0, 1}}},
		},
		{
			name:       "uniform balances a fresh group",
			assignor:   assignorUniform,
			members:    []assignee{{id: "m1", subscribed: []string{"a"}}, {id: "m2", subscribed: []string{"a"}}, {id: "m3", subscribed: []string{"a"}}},
			partitions: map[string]int32{"a": 4},
			want:       map[string]partitionsOf{"m1": {"a": {0, 3}}, "m2": {"a": {1}}, "m3": {"a": {2}}},
		},
		{
			name:     "uniform keeps partitions where they were, up to a fair share",
			assignor: assignorUniform,
			members: []assignee{
				{id: "m1", subscribed: []string{"a"}, previous: partitionsOf{"a": {0, 1, 2, 3}}},
				{id: "m2", subscribed: []string{"a"}},
			},
			partitions: map[string]int32{"a": 4},
			want:       map[string]partitionsOf{"m1": {"a": {0, 1}}, "m2": {"a": {2, 3}}},
		},
		{
			name:     "uniform drops what a member no longer subscribes to",
			assignor: assignorUniform,
			members: []assignee{
				{id: "m1", subscribed: []string{"b"}, previous: partitionsOf{"a": {0, 1}}},
				{id: "m2", subscribed: []string{"a"}, previous: partitionsOf{"b": {0}}},
			},
			partitions: map[string]int32{"a": 2, "b": 1},
			want:       map[string]partitionsOf{"m1": {"b": {0}}, "m2": {"a": {0, 1}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := assign(tt.assignor, tt.members, tt.partitions); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("assigned %v, want %v", got, tt.want)
			}
		})
	}
}
