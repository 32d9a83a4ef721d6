package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // "pgx"
)

// scratchDB is a database created for one run on the server of the -postgres DSN.
type scratchDB struct {
	admin *sql.DB
	name  string
	dsn   string
}

func createScratchDB(ctx context.Context, dsn string) (*scratchDB, error) {
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, err
	}
	admin.SetMaxOpenConns(1)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "hw_bench_" + hex.EncodeToString(b[:])
	if _, err := admin.ExecContext(ctx, `CREATE DATABASE `+name); err != nil {
		_ = admin.Close()
		return nil, fmt.Errorf("create scratch database: %w", err)
	}
	s := &scratchDB{admin: admin, name: name}
	if s.dsn, err = withDatabase(dsn, name); err != nil {
		_ = s.drop() // best effort: the bad DSN is the error to report
		return nil, err
	}
	return s, nil
}

// withDatabase returns dsn (URL or keyword/value form) pointing at database name.
func withDatabase(dsn, name string) (string, error) {
	if !strings.Contains(dsn, "://") {
		return dsn + " dbname=" + name, nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("parse -postgres DSN: %w", err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// drop removes the scratch database, also when the run was interrupted.
func (s *scratchDB) drop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	defer func() { _ = s.admin.Close() }()
	if _, err := s.admin.ExecContext(ctx, `DROP DATABASE IF EXISTS `+s.name+` WITH (FORCE)`); err != nil {
		return fmt.Errorf("drop scratch database %s: %w", s.name, err)
	}
	return nil
}

// settings describes the server: version and the settings that decide commit cost.
func (s *scratchDB) settings(ctx context.Context) string {
	var parts []string
	var v string
	if s.admin.QueryRowContext(ctx, `SHOW server_version`).Scan(&v) == nil {
		parts = append(parts, "PostgreSQL "+v)
	}
	for _, k := range []string{"synchronous_commit", "fsync", "wal_sync_method", "commit_delay", "max_connections", "shared_buffers"} {
		if s.admin.QueryRowContext(ctx, `SHOW `+k).Scan(&v) == nil {
			parts = append(parts, k+"="+v)
		}
	}
	return strings.Join(parts, ", ")
}
