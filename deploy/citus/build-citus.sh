#!/usr/bin/env bash
# Build and install Citus from a source tree into the PostgreSQL that pg_config names.
#
#   deploy/citus/build-citus.sh SOURCE_TREE [PG_CONFIG]
#
# Citus is not in the operating system's or the language registries: it is built from the
# public citusdata/citus source (tag v13.2.2 supports PostgreSQL 15, 16 and 17). The
# tests' cluster (tests/support/citus.py) and CI use the machine's PostgreSQL 15 with
# Citus installed this way; a deployment on containers uses the official Citus image
# instead (deploy/citus/compose.yaml).
#
# Build dependencies (Debian): postgresql-server-dev-15 libcurl4-openssl-dev liblz4-dev
# libzstd-dev libssl-dev libkrb5-dev (and a C compiler, make).
#
# Installing puts citus.so and the extension's SQL files into the server's directories;
# a running server keeps working, and loads Citus only where shared_preload_libraries
# names it (a restart of that cluster).
set -euo pipefail

src=${1:?usage: build-citus.sh SOURCE_TREE [PG_CONFIG]}
pg_config=${2:-pg_config}
cd "$src"

# PostgreSQL 15.20 (and later 15.x) declares have_createdb_privilege() extern in
# commands/dbcommands.h; Citus 13.2's compatibility header for PostgreSQL < 16 defines a
# static copy of the same name, and the build fails with "static declaration follows
# non-static declaration". Rename Citus's copy (harmless on older 15.x headers).
compat=src/include/pg_version_compat.h
fix='#define have_createdb_privilege citus_have_createdb_privilege'
if grep -q '^have_createdb_privilege(void)' "$compat" && ! grep -qF "$fix" "$compat"; then
  awk -v fix="$fix" '
    /^static inline bool$/ { held = $0; next }
    held != "" {
      if ($0 ~ /^have_createdb_privilege\(void\)/) {
        print "/* PostgreSQL 15.20 declares have_createdb_privilege() extern: keep ours apart. */"
        print fix
      }
      print held; held = ""
    }
    { print }' "$compat" >"$compat.new"
  mv "$compat.new" "$compat"
  echo "build-citus: renamed Citus's static have_createdb_privilege in $compat"
fi

./configure PG_CONFIG="$pg_config"
make -j"$(nproc)"
make install
echo "build-citus: installed Citus $(sed -n 's/^default_version = .\(.*\).$/\1/p' \
  src/backend/distributed/citus.control) into $("$pg_config" --pkglibdir)"
