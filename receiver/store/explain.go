package store

import (
	"context"
	"fmt"
	"time"
)

// Plan operations Explain knows.
const (
	PlanLease = "lease"
	PlanSweep = "sweep"
	PlanDepth = "depth"
	// PlanSinkDepths is SinkDepths' statement.
	PlanSinkDepths = "sink-depths"
)

// Explain returns the query plan of one of the store's recurring statements (PlanLease,
// PlanSweep, PlanDepth, PlanSinkDepths), as it would run at now, so an operator (and bench-receiver) can see
// that a lease or a sweep walks an index instead of sorting the backlog. On SQLite it is
// EXPLAIN QUERY PLAN (nothing runs); on PostgreSQL EXPLAIN (ANALYZE, BUFFERS), which runs the
// statement, inside a transaction that is rolled back, so the plan shows the rows and the
// buffers it really touched and the store is left as it was.
func (s *SQL) Explain(ctx context.Context, op string, now time.Time) ([]string, error) {
	var q string
	var args []any
	switch op {
	case PlanLease:
		q = leaseSQL(s.dialect)
		args = []any{now.UnixMicro(), now.Add(explainLease).UnixMicro(), 8}
	case PlanSweep:
		q, args = sweepSQL(s.dialect), []any{now.UnixMicro(), sweepBatch}
	case PlanDepth:
		q = depthSQL
	case PlanSinkDepths:
		q = sinkDepthsSQL
	default:
		return nil, fmt.Errorf("store: explain: unknown statement %q", op)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("store: explain %s: %w", op, err)
	}
	defer func() { _ = tx.Rollback() }()
	if s.dialect == dialectPostgres {
		rows, err := tx.QueryContext(ctx, `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) `+q, args...)
		if err != nil {
			return nil, fmt.Errorf("store: explain %s: %w", op, err)
		}
		defer rows.Close()
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				return nil, fmt.Errorf("store: explain %s: %w", op, err)
			}
			plan = append(plan, line)
		}
		return plan, rows.Err()
	}
	rows, err := tx.QueryContext(ctx, `EXPLAIN QUERY PLAN `+q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: explain %s: %w", op, err)
	}
	defer rows.Close()
	// Each row is (id, parent, unused, detail); the tree is printed indented by depth.
	depth := map[int]int{}
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			return nil, fmt.Errorf("store: explain %s: %w", op, err)
		}
		depth[id] = depth[parent] + 1
		plan = append(plan, fmt.Sprintf("%*s%s", 2*(depth[id]-1), "", detail))
	}
	return plan, rows.Err()
}

// explainLease is the lease Explain's lease statement hands out (the delivery pool's default).
const explainLease = 30 * time.Second
