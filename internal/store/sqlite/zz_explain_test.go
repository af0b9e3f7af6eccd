package sqlite

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func TestZExplain(t *testing.T) {
	q := os.Getenv("ZQ")
	if q == "" {
		t.Skip()
	}
	s, err := Open(t.Context(), Config{Path: filepath.Join(t.TempDir(), "plan.db"), Synchronous: "OFF"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var sqlText string
	switch q {
	case "finish":
		sqlText = finishBatchSQL(2, 0b1100)
	case "lease":
		sqlText = leaseSQL(0, false)
	default:
		sqlText = q
	}
	n := 0
	for _, c := range sqlText {
		if c == '?' {
			n++
		}
	}
	args := make([]any, n)
	rows, err := s.w.Query("EXPLAIN "+sqlText, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var addr, p1, p2, p3 int
		var op string
		var comment any
		var p4, p5 any
		if err := rows.Scan(&addr, &op, &p1, &p2, &p3, &p4, &p5, &comment); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("%3d %-14s %4d %4d %4d %v %v\n", addr, op, p1, p2, p3, p4, p5)
	}
}

func TestZPlan(t *testing.T) {
	q := os.Getenv("ZP")
	if q == "" {
		t.Skip()
	}
	s, err := Open(t.Context(), Config{Path: filepath.Join(t.TempDir(), "plan.db"), Synchronous: "OFF"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n := 0
	for _, c := range q {
		if c == '?' {
			n++
		}
	}
	rows, err := s.w.Query("EXPLAIN QUERY PLAN "+q, make([]any, n)...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, parent, notused int
		var detail string
		rows.Scan(&id, &parent, &notused, &detail)
		fmt.Println(detail)
	}
}
