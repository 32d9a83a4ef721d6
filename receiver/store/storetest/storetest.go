// Package storetest gives tests a fresh database for the receiver's store: a throwaway
// PostgreSQL database or a SQLite file in the test's temporary directory.
package storetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // driver "pgx"

	"github.com/hookwarden/hookwarden/internal/testtier"
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
	testtier.RequiresServers(t, "PostgreSQL")
	u, db := adminDB(t)
	defer func() { _ = db.Close() }()
	admin := u.String()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

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

// PostgresSlotDSN is PostgresDSN for a process that may be killed before its cleanups run, as
// fuzzing workers are when fuzzing ends. Its database is hwslot_<name>_<n>, for the first slot n
// no live process holds: a session advisory lock, on a connection kept open for the process's
// life, claims the slot; the database is dropped and created empty, and dropped again when the
// test ends. A killed process's lock dies with its connection, so it leaves behind at most its
// slot's database, which the next run takes over: killed workers never pile up databases.
// name must be a valid identifier part (letters, digits, underscores).
func PostgresSlotDSN(t testing.TB, name string) string {
	t.Helper()
	testtier.RequiresServers(t, "PostgreSQL")
	u, db := adminDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := db.Conn(ctx) // the lock's session: held until Cleanup or the process's end
	if err != nil {
		t.Fatalf("PostgreSQL for tests: %v", err)
	}
	slot := -1
	for n := 0; n < 64 && slot < 0; n++ {
		var ok bool
		if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock(hashtext($1), $2)`, "hwslot_"+name, n).Scan(&ok); err != nil {
			t.Fatalf("lock a test database slot: %v", err)
		}
		if ok {
			slot = n
		}
	}
	if slot < 0 {
		t.Fatalf("all 64 hwslot_%s databases are in use", name)
	}
	dbName := fmt.Sprintf("hwslot_%s_%d", name, slot)
	for _, q := range []string{"DROP DATABASE IF EXISTS " + dbName + " WITH (FORCE)", "CREATE DATABASE " + dbName} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("recreate test database %s: %v", dbName, err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := conn.ExecContext(ctx, "DROP DATABASE IF EXISTS "+dbName+" WITH (FORCE)"); err != nil {
			t.Errorf("drop test database %s: %v", dbName, err)
		}
		_ = conn.Close()
		_ = db.Close()
	})
	u.Path = "/" + dbName
	return u.String()
}

// adminDB connects to the test server's admin DSN, failing the test when it is unreachable.
func adminDB(t testing.TB) (*url.URL, *sql.DB) {
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
	return u, db
}

// SQLitePath returns the path of a not yet existing SQLite file in the test's temporary
// directory.
func SQLitePath(t testing.TB) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "hookwarden.db")
}
