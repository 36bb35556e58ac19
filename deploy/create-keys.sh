#!/bin/sh
# One-shot: one API key per role for a tenant, each token written once to
# $KEYS_DIR/<role>.token (mode 0600). A token file that exists is kept, so running this
# again mints nothing; delete a file (and `arvis keys revoke` its key) to rotate it.
#
#   KEYS_TENANT  the tenant (default: default)
#   KEYS_ROLES   the roles, space-separated (default: agent approver auditor admin)
#   KEYS_DIR     where the token files go (default: $ARVIS_DATA_DIR/keys)
set -eu

tenant="${KEYS_TENANT:-default}"
roles="${KEYS_ROLES:-agent approver auditor admin}"
dir="${KEYS_DIR:-${ARVIS_DATA_DIR:-/var/lib/arvis}/keys}"

umask 077
mkdir -p "$dir"
for role in $roles; do
  file="$dir/$role.token"
  if [ -s "$file" ]; then
    echo "kept $file"
    continue
  fi
  # The token is the last line `arvis keys create` prints; it is never printed here.
  created=$(arvis keys create --tenant "$tenant" --principal "$tenant-$role" --role "$role")
  printf '%s\n' "$created" | tail -n 1 > "$file.new"
  mv "$file.new" "$file"
  echo "created $file for $tenant-$role ($role)"
done
