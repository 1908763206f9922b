package statictopic

import (
	"errors"
	"testing"
)

func TestCheckRecreate(t *testing.T) {
	sc := mustScope(t, "c1")
	created, err := Create("t", sc, 4, []string{"b1", "b2"}, 1, 1000, nil)
	if err != nil {
		t.Fatal(err)
	}
	few, err := Create("f", sc, 2, []string{"b1", "b2", "b3"}, 1, 1000, nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		m       Mapping
		brokers []string
		want    error
	}{
		{"identical", created, []string{"b1", "b2"}, nil},
		{"identical, other order", created, []string{"b2", "b1"}, nil},
		{"other brokers", created, []string{"b3", "b4"}, ErrTopicExists},
		{"one broker left out", created, []string{"b1"}, ErrTopicExists},
		{"one broker more", created, []string{"b1", "b2", "b3"}, ErrTopicExists},
		{"more brokers than queues, identical", few, []string{"b1", "b2", "b3"}, nil},
		{"bad broker name", created, []string{""}, ErrInvalid},
	}
	for _, tc := range cases {
		err := CheckRecreate(tc.m, tc.brokers)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: CheckRecreate(%v) = %v, want %v", tc.name, tc.brokers, err, tc.want)
		}
	}
}
