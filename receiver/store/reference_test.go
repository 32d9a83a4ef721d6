package store

import (
	"database/sql"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/receiver/store/storetest"
)

func TestInsertRateReference(t *testing.T) {
	dsn := storetest.PostgresDSN(t)
	perSec, err := InsertRateReference(testCtx(t), dsn, 2, 300*time.Millisecond)
	if err != nil {
		t.Fatalf("InsertRateReference: %v", err)
	}
	if perSec <= 0 {
		t.Errorf("InsertRateReference = %v commits/s, want a positive rate", perSec)
	}
	t.Logf("single-row INSERT+COMMIT, 2 connections: %.0f commits/s", perSec)

	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var left int
	if err := db.QueryRowContext(testCtx(t), `SELECT count(*) FROM pg_tables WHERE tablename LIKE 'hw_insert_reference_%'`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d scratch tables left behind, want none", left)
	}
}
