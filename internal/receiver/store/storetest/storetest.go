// Package storetest gives tests a fresh database for the receiver's store: a throwaway
// PostgreSQL database or a SQLite file in the test's temporary directory.
package storetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // driver "pgx"
)

// EnvPostgres names the variable holding the admin DSN of the test server; the user must be
// allowed to create databases.
const EnvPostgres = "HOOKWARDEN_TEST_POSTGRES"

// DefaultPostgres is the admin DSN used when EnvPostgres is unset.
const DefaultPostgres = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// PostgresDSN creates an empty database hwtest_<random> on the test server, drops it when the
// test ends and returns its DSN. An unreachable server fails the test (never skips it): the
// receiver's PostgreSQL guarantees are only tested when the tests run against one.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	admin := os.Getenv(EnvPostgres)
	if admin == "" {
		admin = DefaultPostgres
	}
	u, err := url.Parse(admin)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("%s must be a postgres:// URL", EnvPostgres)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := sql.Open("pgx", admin)
	if err == nil {
		err = db.PingContext(ctx)
	}
	if err != nil {
		if db != nil {
			_ = db.Close()
		}
		t.Fatalf("PostgreSQL for tests is not reachable at %s: %v\n"+
			"Start one with hack/postgres.sh (it prints the DSN), or point %s at a server whose user may CREATE DATABASE.",
			u.Redacted(), err, EnvPostgres)
	}
	defer func() { _ = db.Close() }()

	var suffix [8]byte
	_, _ = rand.Read(suffix[:])
	name := "hwtest_" + hex.EncodeToString(suffix[:])
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create test database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		db, err := sql.Open("pgx", admin)
		if err != nil {
			t.Errorf("drop test database %s: %v", name, err)
			return
		}
		defer func() { _ = db.Close() }()
		// FORCE: a store the test left open must not keep the database alive.
		if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop test database %s: %v", name, err)
		}
	})
	u.Path = "/" + name
	return u.String()
}

// SQLitePath returns the path of a not yet existing SQLite file in the test's temporary
// directory.
func SQLitePath(t testing.TB) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "hookwarden.db")
}
