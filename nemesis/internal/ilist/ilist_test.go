package ilist

import (
	"slices"
	"testing"
)

type item struct {
	id    int
	links Links[item]
}

func ids(l *List[item]) []int {
	var out []int
	for e := l.Front(); e != nil; e = e.links.Next() {
		out = append(out, e.id)
	}
	return out
}

func TestList(t *testing.T) {
	tests := []struct {
		name   string
		remove []int // indices into items 0..3, in order
		want   []int
	}{
		{"none", nil, []int{0, 1, 2, 3}},
		{"head", []int{0}, []int{1, 2, 3}},
		{"middle", []int{2}, []int{0, 1, 3}},
		{"tail", []int{3}, []int{0, 1, 2}},
		{"head then new head", []int{0, 1}, []int{2, 3}},
		{"tail then new tail", []int{3, 2}, []int{0, 1}},
		{"all, out of order", []int{2, 0, 3, 1}, nil},
	}
	for _, tt := range tests {
		var items [4]item
		var l List[item]
		for i := range items {
			items[i].id = i
			l.PushBack(&items[i], &items[i].links)
		}
		for _, i := range tt.remove {
			l.Remove(&items[i].links)
		}
		if got := ids(&l); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
		if l.Empty() != (len(tt.want) == 0) {
			t.Errorf("%s: Empty() = %v with %v left", tt.name, l.Empty(), tt.want)
		}
		// A removed element goes back at the tail, as a reused request does.
		if len(tt.remove) > 0 {
			r := &items[tt.remove[0]]
			l.PushBack(r, &r.links)
			if got := ids(&l); !slices.Equal(got, append(slices.Clone(tt.want), r.id)) {
				t.Errorf("%s: after pushing %d back: %v", tt.name, r.id, got)
			}
		}
	}
}

func TestListAllocatesNothing(t *testing.T) {
	var items [8]item
	var l List[item]
	a := testing.AllocsPerRun(100, func() {
		for i := range items {
			l.PushBack(&items[i], &items[i].links)
		}
		for e := l.Front(); e != nil; e = l.Front() {
			l.Remove(&e.links)
		}
	})
	if a != 0 || !l.Empty() {
		t.Errorf("%v allocations, empty %v", a, l.Empty())
	}
}
