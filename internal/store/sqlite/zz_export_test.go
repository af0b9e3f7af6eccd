package sqlite

func SqliteExecForTest(s *Store, q string) (any, error) { return s.w.Exec(q) }
