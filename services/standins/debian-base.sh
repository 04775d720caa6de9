#!/usr/bin/env bash
# LOCAL STAND-IN, for machines that cannot reach Docker Hub: a minimal Debian base image
# made with debootstrap from deb.debian.org and `docker import`ed. Users with Docker Hub
# never need this; the real images build FROM the upstream bases.
#
#   services/standins/debian-base.sh SUITE TAG      e.g.  trixie retriever-standin/debian:trixie
#
# Root only (debootstrap). Does nothing when TAG already exists on the engine.
set -euo pipefail
suite=${1:?usage: debian-base.sh SUITE TAG}
tag=${2:?usage: debian-base.sh SUITE TAG}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

if docker image inspect "$tag" >/dev/null 2>&1; then
    echo "base $tag: present"
    exit 0
fi
command -v debootstrap >/dev/null || {
    echo "error: debootstrap is not installed (apt-get install -y debootstrap)" >&2
    exit 2
}
work=$(mktemp -d /var/tmp/retriever-debootstrap.XXXXXX)
trap 'rm -rf "$work"' EXIT
root="$work/rootfs"
echo "base $tag: debootstrap --variant=minbase $suite (log: $work/debootstrap.log)"
if ! debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1; then
    tail -n 20 "$work/debootstrap.log" >&2
    echo "error: debootstrap $suite failed" >&2
    exit 2
fi
# The same sources an official debian:$suite image has: main, updates and security.
cat >"$root/etc/apt/sources.list" <<EOF
deb $mirror $suite main
deb $mirror $suite-updates main
deb ${mirror%/debian}/debian-security $suite-security main
EOF
# As in the official images: no package cache kept inside layers, no recommends.
cat >"$root/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache ""; Dir::Cache::srcpkgcache "";
EOF
echo 'APT::Install-Recommends "false";' >"$root/etc/apt/apt.conf.d/docker-no-recommends"
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/tmp/*
tar -C "$root" --numeric-owner -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' \
    --message "local stand-in: debootstrap --variant=minbase $suite" - "$tag" >/dev/null
echo "base $tag: imported"
