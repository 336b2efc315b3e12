# Sourced by the .ci scripts that fetch from another Debian release (trixie) than the
# machine's: `private_apt_config DIR SOURCE_LINE` writes a source list under DIR and
# sets the array `apt_opts`, so `apt-get "${apt_opts[@]}" update|download|source`
# uses only that list.
#
# The system's sources, lists and caches are never touched: the source list, the
# index lists and the package cache all live under DIR. The system's apt.conf.d
# still applies (proxy and date-check settings). A mktemp dir is root-only, so
# apt's unprivileged '_apt' download user couldn't write there; Sandbox::User=root
# avoids the "download is performed unsandboxed" warning. Signatures are checked
# against the system keyring, which on Debian 12 already holds the trixie archive
# keys (debian-archive-keyring).
# shellcheck shell=bash

private_apt_config() {
  local dir=$1 line=$2
  mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial"
  printf '%s\n' "$line" > "$dir/sources.list"
  apt_opts=(
    -q
    -o "Dir::Etc::SourceList=$dir/sources.list"
    -o "Dir::Etc::SourceParts=/dev/null"
    -o "Dir::State::Lists=$dir/lists"
    -o "Dir::Cache=$dir/cache"
    -o "APT::Sandbox::User=root"
  )
}
