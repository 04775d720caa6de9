#!/usr/bin/env bash
# LOCAL STAND-INS for the three upstream images, for machines that cannot reach Docker Hub
# (see services/standins/README.md). Builds them on the engine at $DOCKER_HOST, each once:
# an image whose inputs did not change is reused ("cached"). Then tags them under the
# upstream names that docker-compose.yml and tests/conftest.py use, unless a real upstream
# image already has that name on this engine (it is never overwritten).
#
#   DOCKER_HOST=unix:///var/run/retriever-docker.sock services/standins/build.sh [db|python|ollama|all]
#
# Root is needed only for the first debootstrap of each Debian base.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
what=${1:-all}
LABEL=org.retriever.standin

say() { printf 'standins: %s\n' "$*"; }

# Hash of a build's inputs: every file of the context (path and bytes) plus the base image.
inputs_hash() {
    local ctx=$1 base=$2
    {
        docker image inspect --format '{{.Id}}' "$base"
        (cd "$ctx" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
    } | sha256sum | cut -c1-16
}

# build TAG CONTEXT BASE: docker build unless TAG exists with the same inputs hash.
build() {
    local tag=$1 ctx=$2 base=$3 hash have started
    hash=$(inputs_hash "$ctx" "$base")
    have=$(docker image inspect --format "{{index .Config.Labels \"$LABEL.inputs\"}}" "$tag" 2>/dev/null || true)
    if [ "$have" = "$hash" ]; then
        say "$tag: cached"
        return
    fi
    started=$SECONDS
    say "$tag: building (inputs $hash)"
    if ! docker build --quiet --build-arg "BASE_IMAGE=$base" --label "$LABEL=1" \
        --label "$LABEL.inputs=$hash" -t "$tag" "$ctx" >"$ctx.build.log" 2>&1; then
        tail -n 30 "$ctx.build.log" >&2
        say "error: building $tag failed (log above)" >&2
        exit 2
    fi
    rm -f "$ctx.build.log"
    say "$tag: built in $((SECONDS - started)) s"
}

# alias STANDIN UPSTREAM: give the stand-in the upstream name, never replacing a real image.
alias_upstream() {
    local standin=$1 upstream=$2 marked
    if docker image inspect "$upstream" >/dev/null 2>&1; then
        marked=$(docker image inspect --format "{{index .Config.Labels \"$LABEL\"}}" "$upstream")
    else
        marked=absent
    fi
    if [ "$marked" != "1" ] && [ "$marked" != "absent" ]; then
        say "$upstream: a real upstream image is present; left as it is"
        return
    fi
    docker tag "$standin" "$upstream"
    say "$upstream -> $standin"
}

base() {
    "$here/debian-base.sh" "$1" "retriever-standin/debian:$1"
}

scratch=$(mktemp -d /var/tmp/retriever-standins.XXXXXX)
trap 'rm -rf "$scratch"' EXIT

if [ "$what" = all ]; then
    # The two debootstraps are mostly downloads: run them side by side.
    base trixie &
    trixie=$!
    base bookworm
    wait "$trixie"
fi

if [ "$what" = all ] || [ "$what" = db ]; then
    base trixie
    build retriever-standin/pgvector:0.8.0-pg17 "$here/pgvector" retriever-standin/debian:trixie
    alias_upstream retriever-standin/pgvector:0.8.0-pg17 pgvector/pgvector:0.8.0-pg17
    alias_upstream retriever-standin/pgvector:0.8.0-pg17 pgvector/pgvector:pg17
fi

if [ "$what" = all ] || [ "$what" = python ] || [ "$what" = ollama ]; then
    base bookworm
    # The context: the Dockerfile and this machine's extra CA certificates, if any.
    ctx="$scratch/python"
    mkdir -p "$ctx/extra-ca"
    cp "$here/python/Dockerfile" "$ctx/"
    find /usr/local/share/ca-certificates -name '*.crt' -type f -exec cp {} "$ctx/extra-ca/" \; 2>/dev/null || true
    build retriever-standin/python:3.11-bookworm "$ctx" retriever-standin/debian:bookworm
    alias_upstream retriever-standin/python:3.11-bookworm python:3.11.13-slim-bookworm
fi

if [ "$what" = all ] || [ "$what" = ollama ]; then
    # The context: the server, the test suite's model maker, and a corpus to learn from.
    ctx="$scratch/ollama"
    mkdir -p "$ctx/corpus"
    cp "$here/ollama/Dockerfile" "$here/ollama/ollama.py" "$repo/tests/model_factory.py" "$ctx/"
    cp -r "$repo/tests/vault" "$ctx/corpus/tests-vault"
    cp -r "$repo/examples/vault" "$ctx/corpus/examples-vault"
    build retriever-standin/ollama:0.6.8 "$ctx" retriever-standin/python:3.11-bookworm
    alias_upstream retriever-standin/ollama:0.6.8 ollama/ollama:0.6.8
fi
