#!/usr/bin/env bash
# The container checks, on the project's own Docker engine (services/engine.sh):
#
#   services/containers.sh compose-test      build the images, run services/compose_check.py
#   services/containers.sh test-containers [PYTEST ARGS]
#                                            the test suite on a testcontainers PostgreSQL
#
# Both start the engine when it is missing (root only) and SKIP, exit 0 with a clear line,
# when it cannot start here. DOCKER_HOST is always set to the project's socket, never the
# default one. Images come from Docker Hub where it is reachable; here, local stand-ins
# (services/standins/build.sh) carry the upstream names.
set -euo pipefail
cd "$(dirname "$0")/.."
export RETRIEVER_DOCKER_HOST=${RETRIEVER_DOCKER_HOST:-unix:///var/run/retriever-docker.sock}
export DOCKER_HOST=$RETRIEVER_DOCKER_HOST
BIN=${BIN:-.venv/bin}
what=${1:?usage: containers.sh compose-test|test-containers [pytest args]}
shift

engine() {
    local rc=0
    services/engine.sh start || rc=$?
    if [ "$rc" = 3 ]; then
        echo "$what: SKIPPED: no Docker engine could be started here (reason above)"
        exit 0
    fi
    [ "$rc" = 0 ] || exit "$rc"
}

timed() {
    local label=$1 started=$SECONDS
    shift
    "$@"
    echo "$what: $label took $((SECONDS - started)) s"
}

# The app image from the project's own Dockerfile; its base is the pinned upstream name,
# which is the local stand-in on an engine without Docker Hub.
build_app() {
    local base
    base=$(docker image inspect --format '{{index .Config.Labels "org.retriever.standin"}}' \
        python:3.11.13-slim-bookworm 2>/dev/null || true)
    echo "$what: building the app image (services/app/Dockerfile, base python:3.11.13-slim-bookworm${base:+ = local stand-in})"
    # Without the hub (a stand-in base), the bundled fallback model is made at build time.
    docker build --quiet -f services/app/Dockerfile \
        --build-arg PYTHON_IMAGE=python:3.11.13-slim-bookworm \
        ${base:+--build-arg FALLBACK_MODEL_STANDIN=1} -t retriever-app:local . \
        >/tmp/retriever-app-build.log 2>&1 || {
        tail -n 30 /tmp/retriever-app-build.log >&2
        echo "$what: error: building the app image failed (log: /tmp/retriever-app-build.log)" >&2
        exit 2
    }
    # The image a rebuild replaced, untagged now: not kept (the layer cache stays).
    docker image prune -f >/dev/null
}

case "$what" in
    compose-test)
        engine
        timed "stand-in images" services/standins/build.sh all
        timed "app image" build_app
        # The Ollama stand-in serves every model name with its own 64-dimension model.
        if [ -n "$(docker image inspect --format '{{index .Config.Labels "org.retriever.standin"}}' \
            ollama/ollama:0.6.8 2>/dev/null || true)" ]; then
            export RETRIEVER_OLLAMA_DIM=64
        fi
        timed "compose check" "$BIN/python" services/compose_check.py
        ;;
    test-containers)
        engine
        timed "database image" services/standins/build.sh db
        # Ryuk (testcontainers' reaper) cannot be pulled here; the fixture's context manager
        # removes the container, and leftovers of an interrupted run are removed below.
        export TESTCONTAINERS_RYUK_DISABLED=true RETRIEVER_TEST_REQUIRE_DOCKER=1
        rc=0
        timed "pytest on testcontainers" "$BIN/pytest" -q -p no:cacheprovider "$@" || rc=$?
        docker ps -aq --filter label=org.testcontainers.lang=python | xargs -r docker rm -f >/dev/null
        exit "$rc"
        ;;
    *)
        echo "usage: containers.sh compose-test|test-containers [pytest args]" >&2
        exit 2
        ;;
esac
