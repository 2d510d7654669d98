#!/usr/bin/env bash
# Local stand-ins for the upstream images docker/ uses, for machines that cannot reach
# Docker Hub but can reach Debian's mirror: one Debian bookworm root file system made with
# debootstrap (Debian's python3 3.11, python3-venv, redis-server, unbound), imported as
#   dnsd-offline/python:3.11-slim   dnsd-offline/redis:7   dnsd-offline/debian:bookworm
# Idempotent and cached: the file system is kept in $CACHE, images that exist are kept, so
# a second run takes seconds. Then:
#   DNSD_PYTHON_IMAGE=dnsd-offline/python:3.11-slim DNSD_REDIS_IMAGE=dnsd-offline/redis:7 \
#   DNSD_DEBIAN_IMAGE=dnsd-offline/debian:bookworm docker-compose -f docker/compose.yaml -p dnsd up -d --build
set -euo pipefail
CACHE=${DNSD_OFFLINE_CACHE:-/var/cache/dnsd-offline}
MIRROR=${DNSD_DEBIAN_MIRROR:-http://deb.debian.org/debian}
TAGS=(dnsd-offline/python:3.11-slim dnsd-offline/redis:7 dnsd-offline/debian:bookworm)
PACKAGES=python3,python3-venv,python3-pip,redis-server,unbound,ca-certificates

missing=()
for tag in "${TAGS[@]}"; do
    docker image inspect "$tag" >/dev/null 2>&1 || missing+=("$tag")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "offline images present: ${TAGS[*]}"
    exit 0
fi
mkdir -p "$CACHE"
if [ ! -f "$CACHE/rootfs.tar" ]; then
    command -v debootstrap >/dev/null || { echo "debootstrap is needed (Debian package debootstrap)" >&2; exit 1; }
    root="$CACHE/rootfs"
    rm -rf "$root"
    debootstrap --variant=minbase --include="$PACKAGES" bookworm "$root" "$MIRROR"
    # This machine's own certificate authorities (an egress proxy's, say), so that pip and
    # apt inside the stand-ins trust what the host trusts; upstream images need none of it.
    if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
        cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
        chroot "$root" update-ca-certificates >/dev/null
    fi
    chroot "$root" apt-get clean
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin
    ln -sf python3 "$root/usr/bin/python"   # as python:3.11-slim has it
    tar -C "$root" -cf "$CACHE/rootfs.tar.tmp" .
    mv "$CACHE/rootfs.tar.tmp" "$CACHE/rootfs.tar"
    rm -rf "$root"
fi
for tag in "${missing[@]}"; do
    docker import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' \
        --change 'CMD ["/bin/bash"]' "$CACHE/rootfs.tar" "$tag" >/dev/null
    echo "imported $tag"
done
