#!/usr/bin/env bash
# Installs the pgvector extension into the machine's PostgreSQL server, built from
# Debian's own source package, unless the server already offers it.
#
# Why: Debian 12 packages pgvector for no PostgreSQL version, and the image's server
# is Debian's PostgreSQL 15. Debian 13 (trixie) carries the `pgvector` source package
# (0.8.x), which builds against any server through PGXS. Without pgvector Troupe still
# runs (documents are then searched by full text only), so the document-index tests
# that need vectors would be skipped, not failed; CI wants them run.
#
# Usage (as root, with the server up): bash .ci/pgvector.sh
#   PGVECTOR_DSN  libpq connection used for the check (default: the CI database).
# Progress goes to stderr. Takes about 30 s when it builds, well under a second when
# the extension is already available. Touches only: the apt packages it installs
# (postgresql-server-dev-<major>, build-essential, dpkg-dev from the system's own
# sources) and the server's extension and library directories (`make install`).
# The trixie source list, its index and the unpacked sources live in a temp dir.
set -euo pipefail

log() { printf '[pgvector %s] %s\n' "$(date '+%H:%M:%S')" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

readonly DSN="${PGVECTOR_DSN:-postgres://postgres@127.0.0.1:5432/test}"
psql_q() { PGCONNECT_TIMEOUT=10 psql -X -w -q -t -A -v ON_ERROR_STOP=1 "$DSN" "$@"; }

available() { [[ -n "$(psql_q -c "select name from pg_available_extensions where name = 'vector'")" ]]; }

if available; then
  log "the server already offers the vector extension; nothing to do"
  exit 0
fi
[[ "$(id -u)" -eq 0 ]] || die "pgvector is missing and installing it needs root (apt-get, make install)"

# Build against the server that answers, not whatever pg_config is first on PATH.
major="$(psql_q -c 'show server_version_num')"
major=$(( major / 10000 ))
pg_config="/usr/lib/postgresql/$major/bin/pg_config"
log "building pgvector for PostgreSQL $major"

export DEBIAN_FRONTEND=noninteractive
apt_install() { apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=300 "$@" >&2; }
# Try with the current lists first (fast); a fresh image may have stale ones.
if ! apt_install "postgresql-server-dev-$major" build-essential dpkg-dev; then
  log "retrying after apt-get update"
  apt-get update -q -o DPkg::Lock::Timeout=300 >&2 || die "apt-get update failed"
  apt_install "postgresql-server-dev-$major" build-essential dpkg-dev || die "apt-get install failed"
fi
[[ -x "$pg_config" ]] || die "$pg_config not found after installing postgresql-server-dev-$major"

work="$(mktemp -d "${TMPDIR:-/tmp}/troupe-pgvector.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# A private apt configuration for the trixie sources only: the system's sources,
# lists and caches stay untouched.
# shellcheck source=.ci/private-apt.sh
source "$(dirname "${BASH_SOURCE[0]}")/private-apt.sh"
private_apt_config "$work/apt" 'deb-src http://deb.debian.org/debian trixie main'
mkdir -p "$work/src"
log "apt-get update (private trixie deb-src list)"
apt-get "${apt_opts[@]}" update >&2 || die "apt-get update for trixie sources failed (is deb.debian.org reachable?)"
log "apt-get source pgvector"
( cd "$work/src" && apt-get "${apt_opts[@]}" source pgvector ) >&2 || die "apt-get source pgvector failed"

srcdir="$(find "$work/src" -mindepth 1 -maxdepth 1 -type d -name 'pgvector-*' | head -n 1)"
[[ -n "$srcdir" && -f "$srcdir/Makefile" ]] || die "no unpacked pgvector source with a Makefile under $work/src"
log "make in $srcdir"
make -C "$srcdir" -j"$(nproc)" PG_CONFIG="$pg_config" >&2 || die "make failed"
make -C "$srcdir" PG_CONFIG="$pg_config" install >&2 || die "make install failed"

available || die "installed, but the server still does not list the vector extension"
log "done: the server offers vector $(psql_q -c "select default_version from pg_available_extensions where name = 'vector'")"
