#!/usr/bin/env bash
# Build the stand-in base images docker-compose.yml names (see README.md here), then the project's image.
# Needs a running Docker engine (`dockerd --storage-driver=vfs --iptables=false`), debootstrap, and network access to
# Debian's mirror, PyPI and Maven Central from the build (`--network host`). Idempotent: an image already built is kept.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
project="$(cd "$here/../.." && pwd)"
rootfs="${STAND_IN_ROOTFS:-/var/tmp/stand-in-debian-bookworm}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

have() { docker image inspect "$1" >/dev/null 2>&1; }

if ! have stand-in/debian:bookworm; then
  if [ ! -x "$rootfs/bin/bash" ]; then
    echo "stand-ins: debootstrap bookworm into $rootfs"
    debootstrap --variant=minbase bookworm "$rootfs" "$mirror"
  fi
  # The images trust what this host trusts: its locally added CAs (a proxy between the build and PyPI or Maven
  # Central re-signs their certificates with one), made part of the system store by ca-certificates in each image.
  mkdir -p "$rootfs/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/" 2>/dev/null || true
  echo "stand-ins: docker import stand-in/debian:bookworm"
  tar -C "$rootfs" -c . | docker import - stand-in/debian:bookworm
fi

build() {  # build <tag> <folder>
  if have "$1"; then
    echo "stand-ins: $1 already built"
    return
  fi
  echo "stand-ins: building $1"
  docker build --network host -t "$1" "$2"
}

build apache/airflow:3.3.2-python3.11 "$here/airflow"
build postgres:16.4 "$here/postgres"
build redis:7.0.15 "$here/redis"
cp "$project/constraints.txt" "$here/moto/constraints.txt"
build motoserver/moto:5.2.5 "$here/moto"
rm -f "$here/moto/constraints.txt"
build marquezproject/marquez:0.51.1 "$here/placeholder"
build marquezproject/marquez-web:0.51.1 "$here/placeholder"
echo "stand-ins: building the project's image lineage-aware-pipelines:0.1.0"
docker build --network host -t lineage-aware-pipelines:0.1.0 "$project"
