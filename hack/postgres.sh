#!/usr/bin/env bash
# Makes a PostgreSQL reachable for the receiver's store tests and prints its DSN, the value for
# HOOKWARDEN_TEST_POSTGRES (trust auth, user postgres, database test). Idempotent: a server
# already accepting connections on the port is only reported.
# Usage: hack/postgres.sh [--stop]
#
#   PGPORT            port on 127.0.0.1 (default 5432)
#   HOOKWARDEN_PGDATA data directory when local binaries are used
#                     (default $HOOKWARDEN_CACHE/postgres/<port>, /var/tmp/... when run as root)
#   PG_IMAGE          image when Docker is used (default postgres:16)
#
# Tries, in order: a running server, local binaries (initdb/pg_ctl on PATH or under
# /usr/lib/postgresql), Docker.
set -euo pipefail

PORT=${PGPORT:-5432}
DSN="postgres://postgres@127.0.0.1:${PORT}/test?sslmode=disable"
CACHE=${HOOKWARDEN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hookwarden}
if [[ $(id -u) == 0 ]]; then
  # initdb refuses root; the server runs as "postgres", which cannot enter /root.
  DATA=${HOOKWARDEN_PGDATA:-/var/tmp/hookwarden-postgres/$PORT}
else
  DATA=${HOOKWARDEN_PGDATA:-$CACHE/postgres/$PORT}
fi
CONTAINER="hookwarden-postgres-$PORT"
IMAGE=${PG_IMAGE:-postgres:16}

log() { printf '[postgres] %s\n' "$*" >&2; }

ready() {
  if command -v pg_isready >/dev/null; then
    pg_isready -q -h 127.0.0.1 -p "$PORT" -t 1
  else
    (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null
  fi
}

wait_ready() {
  for _ in $(seq 60); do ready && return 0; sleep 0.5; done
  log "PostgreSQL did not come up on 127.0.0.1:$PORT"; return 1
}

# pgbin finds a PostgreSQL server binary on PATH or in the newest /usr/lib/postgresql/*/bin.
pgbin() {
  command -v "$1" 2>/dev/null && return 0
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)
  [[ -n "$d" && -x "$d/$1" ]] && echo "$d/$1"
}

# as_owner runs a command as the data directory's owner ("postgres" when we are root).
as_owner() {
  if [[ $(id -u) == 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

ensure_test_db() {
  if command -v psql >/dev/null; then
    if [[ -z $(psql -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -Atc "SELECT 1 FROM pg_database WHERE datname = 'test'") ]]; then
      psql -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -qc 'CREATE DATABASE test'
      log "created database test"
    fi
  fi
}

if [[ "${1:-}" == "--stop" ]]; then
  pgctl=$(pgbin pg_ctl || true)
  if [[ -n "$pgctl" && -f "$DATA/postmaster.pid" ]]; then
    as_owner "$pgctl" -D "$DATA" -m fast stop >&2
  elif command -v docker >/dev/null && docker inspect "$CONTAINER" >/dev/null 2>&1; then
    docker rm -f "$CONTAINER" >/dev/null && log "removed container $CONTAINER"
  else
    log "nothing of ours runs on port $PORT"
  fi
  exit 0
fi

if ready; then
  log "server already accepting connections on 127.0.0.1:$PORT"
  ensure_test_db
  echo "$DSN"
  exit 0
fi

initdb=$(pgbin initdb || true)
pgctl=$(pgbin pg_ctl || true)
if [[ -n "$initdb" && -n "$pgctl" ]]; then
  mkdir -p "$DATA"
  [[ $(id -u) == 0 ]] && chown postgres: "$DATA" && chmod 700 "$DATA"
  if [[ ! -f "$DATA/PG_VERSION" ]]; then
    log "initdb in $DATA"
    as_owner "$initdb" -D "$DATA" -U postgres --auth=trust -E UTF8 >/dev/null
  fi
  log "starting $pgctl on 127.0.0.1:$PORT (log: $DATA/server.log)"
  as_owner "$pgctl" -D "$DATA" -l "$DATA/server.log" -w \
    -o "-p $PORT -c listen_addresses=127.0.0.1 -k $DATA" start >/dev/null
elif command -v docker >/dev/null; then
  log "starting $IMAGE as container $CONTAINER"
  docker rm -f "$CONTAINER" >/dev/null 2>&1 || true
  docker run -d --name "$CONTAINER" -p "127.0.0.1:$PORT:5432" \
    -e POSTGRES_HOST_AUTH_METHOD=trust -e POSTGRES_DB=test "$IMAGE" >/dev/null
else
  log "no running server, no PostgreSQL binaries and no docker: install postgresql (e.g. apt-get install postgresql) or docker"
  exit 1
fi
wait_ready
ensure_test_db
echo "$DSN"
