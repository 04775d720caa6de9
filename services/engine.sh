#!/usr/bin/env bash
# A Docker engine of the project's own, on a NON-default socket, for `make compose-test` and
# `make test-containers` on machines without one (CI, development boxes).
#
#   services/engine.sh start    install docker.io / debootstrap / compose if missing (root),
#                               start dockerd, wait until it answers; exit 0 when it is up
#   services/engine.sh stop     stop the dockerd this script started
#   services/engine.sh status   exit 0 when the engine answers
#
# The socket is $RETRIEVER_DOCKER_HOST (default unix:///var/run/retriever-docker.sock), never
# /var/run/docker.sock: tests/conftest.py switches to testcontainers whenever `docker info`
# answers on the default socket, and other test runs on the same machine must keep their
# embedded PostgreSQL. Every caller sets DOCKER_HOST to this socket explicitly.
#
# Exit codes: 0 ok, 2 failed, 3 cannot start here (not root, no engine): callers skip on 3.
set -euo pipefail
host=${RETRIEVER_DOCKER_HOST:-unix:///var/run/retriever-docker.sock}
sock=${host#unix://}
name=$(basename "$sock" .sock)
data_root=${RETRIEVER_DOCKER_DATA_ROOT:-/var/lib/$name}
exec_root=/var/run/$name
pidfile=/var/run/$name.pid
logfile=/var/log/$name.log
plugin_dir=/usr/local/lib/docker/cli-plugins
export DOCKER_HOST=$host

say() { printf 'engine: %s\n' "$*"; }
skip() { printf 'engine: SKIP: %s\n' "$*"; exit 3; }

answers() { timeout 20 docker info >/dev/null 2>&1; }

apt_install() {
    # A package's maintainer script must not start a daemon on the default socket: while
    # installing, an invoke-rc.d policy refuses every service start (unless one exists).
    local policy=/usr/sbin/policy-rc.d made=0
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 0755 "$policy" && made=1
    fi
    local rc=0
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"; } \
        >/tmp/"$name"-apt.log 2>&1 || rc=$?
    [ "$made" = 1 ] && rm -f "$policy"
    if [ "$rc" != 0 ]; then
        tail -n 5 /tmp/"$name"-apt.log >&2
        say "error: apt-get install $* failed (log: /tmp/$name-apt.log)" >&2
        exit 2
    fi
}

# The compose v2 plugin: Debian trixie's docker-compose package (bookworm has only v1),
# taken from a trixie container because this host may be bookworm. Debian's docker-compose
# v1 (1.29) is no fallback: it rejects docker-compose.yml's top-level `name:` (project
# name, kept so existing users' volumes keep their names); it accepts everything else.
ensure_compose() {
    if docker compose version >/dev/null 2>&1; then
        return
    fi
    local here
    here=$(cd "$(dirname "$0")" && pwd)
    if "$here/standins/debian-base.sh" trixie retriever-standin/debian:trixie >/dev/null &&
        mkdir -p "$plugin_dir" &&
        docker run --rm -v "$plugin_dir:/out" retriever-standin/debian:trixie sh -c \
            'apt-get update -qq && apt-get install -y -qq docker-compose >/dev/null &&
             cp /usr/libexec/docker/cli-plugins/docker-compose /out/docker-compose' \
            >/tmp/"$name"-compose.log 2>&1 &&
        docker compose version >/dev/null 2>&1; then
        say "installed the compose v2 plugin from Debian trixie: $(docker compose version --short)"
        return
    fi
    rm -f "$plugin_dir/docker-compose"
    skip "the compose v2 plugin could not be installed from Debian trixie (log: /tmp/$name-compose.log)"
}

start() {
    if answers; then
        say "up at $host"
        ensure_compose
        return
    fi
    [ "$(id -u)" = 0 ] || skip "no Docker engine answers at $host and starting one needs root"
    if ! command -v dockerd >/dev/null || ! command -v debootstrap >/dev/null; then
        say "installing docker.io and debootstrap from Debian"
        apt_install docker.io debootstrap
    fi
    command -v docker >/dev/null || skip "no docker CLI after installing docker.io"
    mkdir -p "$data_root" "$exec_root"
    say "starting dockerd on $host (data $data_root, log $logfile)"
    # setsid: the engine outlives this make target and is stopped by `engine.sh stop`.
    setsid dockerd -H "$host" --data-root "$data_root" --exec-root "$exec_root" \
        --pidfile "$pidfile" >"$logfile" 2>&1 </dev/null &
    local waited=0
    until answers; do
        if ! kill -0 $! 2>/dev/null; then
            tail -n 5 "$logfile" >&2
            skip "dockerd exited at start-up (log: $logfile)"
        fi
        [ "$waited" -lt 60 ] || skip "dockerd did not answer within 60 s (log: $logfile)"
        sleep 1
        waited=$((waited + 1))
    done
    say "up at $host after ${waited} s ($(docker version --format '{{.Server.Version}}'))"
    ensure_compose
}

stop() {
    if [ ! -s "$pidfile" ]; then
        say "not running (no $pidfile)"
        return
    fi
    local pid
    pid=$(cat "$pidfile")
    if kill -0 "$pid" 2>/dev/null; then
        # Containers first, so no stack outlives the engine's restart policy.
        docker ps -q | xargs -r docker stop -t 5 >/dev/null 2>&1 || true
        kill "$pid"
        for _ in $(seq 60); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.5
        done
        kill -0 "$pid" 2>/dev/null && { say "error: dockerd $pid did not stop" >&2; exit 2; }
    fi
    say "stopped"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) answers && say "up at $host" || { say "down at $host"; exit 3; } ;;
    *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
