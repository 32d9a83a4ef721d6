package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// InsertRateReference measures the physical baseline the receiver's group commit must beat:
// on the PostgreSQL at dsn, concurrency connections each run BEGIN; one single-row INSERT;
// COMMIT in a loop for d, into a scratch table shaped like hw_events (unique key, 1 KiB
// payload) that is dropped afterwards. It returns committed transactions per second.
func InsertRateReference(ctx context.Context, dsn string, concurrency int, d time.Duration) (perSec float64, err error) {
	if concurrency < 1 || d <= 0 {
		return 0, errors.New("store: insert rate reference: concurrency and duration must be positive")
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return 0, fmt.Errorf("store: insert rate reference: %w", err)
	}
	defer func() { _ = db.Close() }()
	db.SetMaxOpenConns(concurrency)
	db.SetMaxIdleConns(concurrency)

	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	table := "hw_insert_reference_" + hex.EncodeToString(suffix[:])
	if _, err := db.ExecContext(ctx, `CREATE TABLE `+table+` (
	id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	subscription TEXT NOT NULL,
	event_id TEXT NOT NULL,
	payload BYTEA NOT NULL,
	received_at BIGINT NOT NULL,
	UNIQUE (subscription, event_id))`); err != nil {
		return 0, fmt.Errorf("store: insert rate reference: create scratch table: %w", err)
	}
	defer func() {
		// The caller's context may be over; the scratch table must go anyway.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, derr := db.ExecContext(dctx, `DROP TABLE IF EXISTS `+table); derr != nil && err == nil {
			err = fmt.Errorf("store: insert rate reference: drop scratch table: %w", derr)
		}
	}()

	// Dial every connection before the clock starts.
	conns := make([]*sql.Conn, concurrency)
	for i := range conns {
		if conns[i], err = db.Conn(ctx); err != nil {
			return 0, fmt.Errorf("store: insert rate reference: connect: %w", err)
		}
		defer func() { _ = conns[i].Close() }()
	}

	insert := `INSERT INTO ` + table + ` (subscription, event_id, payload, received_at) VALUES ($1, $2, $3, $4)`
	payload := make([]byte, 1024)
	var (
		committed atomic.Int64
		wg        sync.WaitGroup
		once      sync.Once
		firstErr  error
	)
	start := time.Now()
	deadline := start.Add(d)
	for w, conn := range conns {
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline); i++ {
				if err := insertOne(ctx, conn, insert, fmt.Sprintf("evt_%d_%d", w, i), payload); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				committed.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return 0, fmt.Errorf("store: insert rate reference: %w", firstErr)
	}
	return float64(committed.Load()) / elapsed.Seconds(), nil
}

func insertOne(ctx context.Context, conn *sql.Conn, insert, eventID string, payload []byte) error {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, insert, "reference/rate", eventID, payload, time.Now().UnixMicro()); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}
