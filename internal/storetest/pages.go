package storetest

import (
	"sync"
	"testing"

	"github.com/molt-dev/molt/internal/page"
	"github.com/molt-dev/molt/internal/work"
)

// testPagination: newest first, opaque cursors, stable under concurrent inserts:
// paging through a listing while items are added returns every item that existed
// when paging started exactly once, in order.
func testPagination(t *testing.T, open Opener) {
	e := setup(t, open)
	const n = 23
	want := map[string]bool{}
	var order []string
	for i := 0; i < n; i++ {
		it := e.create(kindT, "")
		want[it.ID] = true
		order = append(order, it.ID)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := e.p.Create(e.ctx, work.Item{Kind: kindT}); err != nil {
				t.Errorf("concurrent insert: %v", err)
				return
			}
		}
	}()
	seen := map[string]bool{}
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > n {
			t.Fatal("pagination does not end")
		}
		pg, err := e.s.ListItems(e.ctx, work.ListQuery{Kind: kindT, Page: page.Query{Cursor: cursor, Limit: 5}})
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		if len(pg.Items) > 5 {
			t.Fatalf("page of %d items, limit 5", len(pg.Items))
		}
		for _, it := range pg.Items {
			if seen[it.ID] {
				t.Fatalf("item %s listed twice", it.ID)
			}
			seen[it.ID] = true
			if want[it.ID] {
				got = append(got, it.ID)
			}
		}
		if pg.Next == "" {
			break
		}
		cursor = pg.Next
	}
	close(stop)
	wg.Wait()
	if len(got) != n {
		t.Fatalf("listed %d of the %d items that existed, want all", len(got), n)
	}
	for i := range got {
		if got[i] != order[n-1-i] {
			t.Fatalf("item %d is %s, want %s (newest first)", i, got[i], order[n-1-i])
		}
	}
	// Status filter and oldest-first.
	c := e.claim(e.get(kindT, order[3]), 0)
	pg, err := e.s.ListItems(e.ctx, work.ListQuery{Kind: kindT, Status: work.StatusRunning})
	if err != nil || len(pg.Items) != 1 || pg.Items[0].ID != c.ID {
		t.Fatalf("running items = %+v (%v), want just %s", pg.Items, err, c.ID)
	}
	pg, err = e.s.ListItems(e.ctx, work.ListQuery{Kind: kindT, Status: work.StatusPending, Oldest: true, Page: page.Query{Limit: 2}})
	if err != nil || len(pg.Items) != 2 || pg.Items[0].ID != order[0] || pg.Items[1].ID != order[1] {
		t.Fatalf("oldest pending = %+v (%v), want %s, %s", pg.Items, err, order[0], order[1])
	}
	if _, err := e.s.ListItems(e.ctx, work.ListQuery{Kind: kindT, Page: page.Query{Cursor: "!!not a cursor"}}); err == nil {
		t.Fatal("malformed cursor accepted")
	}
}
