#!/usr/bin/env bash
# LOCAL STAND-IN entrypoint with the official postgres image's contract (a condensed
# docker-entrypoint.sh): first start runs initdb with POSTGRES_USER / POSTGRES_PASSWORD /
# POSTGRES_DB (and POSTGRES_INITDB_ARGS, POSTGRES_HOST_AUTH_METHOD), runs
# /docker-entrypoint-initdb.d/*.sh|*.sql on a socket-only temporary server, then execs
# postgres as the postgres user. Later starts just exec postgres on the existing data.
set -Eeuo pipefail

log() { printf '%s\n' "$*"; }
fail() { printf 'error: %s\n' "$*" >&2; exit 1; }

# `docker run image -c foo=bar` means `postgres -c foo=bar`, as upstream.
if [ "${1:0:1}" = '-' ]; then
    set -- postgres "$@"
fi

if [ "$1" != 'postgres' ]; then
    exec "$@"
fi

: "${PGDATA:=/var/lib/postgresql/data}"
: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_DB:=$POSTGRES_USER}"
export PGDATA POSTGRES_USER POSTGRES_DB

# As root: create and own the directories, then come back as postgres.
if [ "$(id -u)" = '0' ]; then
    mkdir -p "$PGDATA" /var/run/postgresql
    chmod 00700 "$PGDATA"
    chmod 03775 /var/run/postgresql
    find "$PGDATA" \! -user postgres -exec chown postgres:postgres '{}' +
    chown postgres:postgres /var/run/postgresql
    exec gosu postgres "$BASH_SOURCE" "$@"
fi

psql_init() {
    PGPASSWORD= psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --no-password --no-psqlrc "$@"
}

if [ ! -s "$PGDATA/PG_VERSION" ]; then
    auth=${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}
    if [ -z "${POSTGRES_PASSWORD:-}" ] && [ "$auth" != 'trust' ]; then
        fail "Database is uninitialized and superuser password is not specified: set POSTGRES_PASSWORD (or POSTGRES_HOST_AUTH_METHOD=trust)"
    fi
    # shellcheck disable=SC2086 # POSTGRES_INITDB_ARGS is word-split on purpose, as upstream
    initdb --username="$POSTGRES_USER" --pwfile=<(printf '%s\n' "${POSTGRES_PASSWORD:-}") \
        ${POSTGRES_INITDB_ARGS:-}
    printf '\nhost all all all %s\n' "$auth" >>"$PGDATA/pg_hba.conf"

    # Temporary server on the Unix socket only: nothing can connect over TCP until the
    # database is fully initialised (clients and pg_isready -h see "no response" until then).
    PGUSER="$POSTGRES_USER" pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -p 5432" -w start
    if [ "$POSTGRES_DB" != 'postgres' ]; then
        psql_init --dbname postgres --set db="$POSTGRES_DB" <<<'CREATE DATABASE :"db";'
    fi
    for f in /docker-entrypoint-initdb.d/*; do
        case "$f" in
            *.sh)
                if [ -x "$f" ]; then log "$0: running $f"; "$f"; else log "$0: sourcing $f"; . "$f"; fi ;;
            *.sql) log "$0: running $f"; psql_init --dbname "$POSTGRES_DB" -f "$f" ;;
            *.sql.gz) log "$0: running $f"; gunzip -c "$f" | psql_init --dbname "$POSTGRES_DB" ;;
            *) if [ -e "$f" ]; then log "$0: ignoring $f"; fi ;;
        esac
    done
    PGUSER="$POSTGRES_USER" pg_ctl -D "$PGDATA" -m fast -w stop
    log
    log 'PostgreSQL init process complete; ready for start up.'
    log
else
    log
    log 'PostgreSQL Database directory appears to contain a database; Skipping initialization'
    log
fi

exec "$@"
