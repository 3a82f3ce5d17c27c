#!/usr/bin/env bash
# A real Galaxy v3 API on loopback: Pulp (pulpcore + pulp_ansible, pinned in
# requirements/galaxy-server.txt) on a PostgreSQL cluster of its own, all state under
# $STATE/galaxy-server. A second start reuses the venv and the migrated database. Runs as root:
# it apt-installs Debian's postgresql when missing and runs PostgreSQL as its `postgres` user.
#
#   scripts/galaxy-server.sh start   # prints nothing but progress; writes $G/ansible.cfg and $G/env
#   scripts/galaxy-server.sh stop    # stops the Pulp processes and PostgreSQL (no-op when down)
#
# After start, `ANSIBLE_CONFIG=$G/ansible.cfg ansible-galaxy collection publish|install` talk to
# it (server `local`), and $G/env holds GALAXY_URL, PULP_API and the admin credentials (0600).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
G=$STATE/galaxy-server
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
VENV=$STATE/venvs/pulp
BASE_PATH=published

die() { echo "galaxy-server: $*" >&2; exit 1; }
usage() { echo "usage: $0 start|stop" >&2; exit 2; }
[ $# -eq 1 ] || usage

pgbin() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  if [ -z "$d" ]; then
    echo "-- installing Debian's postgresql"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    d=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
  fi
  echo "$d"
}
as_pg() { runuser -u postgres -- "$@"; }
token() { "$PYTHON" -c "import secrets; print(secrets.token_hex($1))"; }
free_port() { "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# SO_REUSEADDR as the servers set it: a listener makes the port busy, old TIME_WAIT connections not.
port_free() {
  "$PYTHON" -c 'import socket as s, sys; k = s.socket(); k.setsockopt(s.SOL_SOCKET, s.SO_REUSEADDR, 1)
k.bind(("127.0.0.1", int(sys.argv[1])))' "$1" 2>/dev/null
}
# A kept port that something else took since the last run: pick another (the DB keeps no ports).
repick() { sed -i "s/^$1=.*/$1=$(free_port)/" "$G/env"; }
running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

stop() {
  local p
  for p in worker content api; do
    if running "$G/run/$p.pid"; then
      kill -TERM -- "-$(cat "$G/run/$p.pid")" 2>/dev/null || kill -TERM "$(cat "$G/run/$p.pid")"
    fi
  done
  for p in worker content api; do
    for _ in $(seq 50); do running "$G/run/$p.pid" || break; sleep 0.2; done
    if running "$G/run/$p.pid"; then kill -KILL -- "-$(cat "$G/run/$p.pid")" 2>/dev/null || true; fi
    rm -f "$G/run/$p.pid"
  done
  if [ -f "$G/pgdata/postmaster.pid" ]; then
    as_pg "$(pgbin)/pg_ctl" -D "$G/pgdata" -m fast -w stop >/dev/null
  fi
  echo "galaxy-server: stopped"
}

start() {
  mkdir -p "$G/run" "$G/log" "$G/media" "$G/tmp" "$(dirname "$VENV")"
  chmod 755 "$STATE" "$G"
  # The venv, rebuilt only when the pins change.
  local want; want=$(sha256sum requirements/galaxy-server.txt | cut -c1-16)
  if [ "$(cat "$VENV/.stamp" 2>/dev/null)" != "$want" ]; then
    echo "-- pulp venv ($VENV)"
    rm -rf "$VENV"; "$PYTHON" -m venv "$VENV"
    "$VENV/bin/pip" install -q --upgrade 'pip<26'
    "$VENV/bin/pip" install -q --no-deps -r requirements/galaxy-server.txt
    "$VENV/bin/pip" check >/dev/null || die "pip check failed in $VENV: $("$VENV/bin/pip" check)"
    echo "$want" > "$VENV/.stamp"
  fi
  # Ports and secrets are chosen once and kept, so a second start reuses the database.
  if [ ! -f "$G/env" ]; then
    ( umask 077
      cat > "$G/env" <<EOF
PG_PORT=$(free_port)
API_PORT=$(free_port)
CONTENT_PORT=$(free_port)
DB_PASSWORD=$(token 16)
ADMIN_PASSWORD=$(token 16)
SECRET_KEY=$(token 32)
EOF
      "$PYTHON" -c 'import base64, os; print(base64.urlsafe_b64encode(os.urandom(32)).decode())' > "$G/db.key" )
  fi
  # shellcheck disable=SC1091
  . "$G/env"
  local bin; bin=$(pgbin)
  if ! as_pg "$bin/pg_ctl" -D "$G/pgdata" status >/dev/null 2>&1 && ! port_free "$PG_PORT"; then
    repick PG_PORT
  fi
  running "$G/run/api.pid" || port_free "$API_PORT" || repick API_PORT
  running "$G/run/content.pid" || port_free "$CONTENT_PORT" || repick CONTENT_PORT
  # shellcheck disable=SC1091
  . "$G/env"
  if [ ! -f "$G/pgdata/PG_VERSION" ]; then
    echo "-- initdb ($G/pgdata)"
    rm -rf "$G/pgdata"; mkdir -p "$G/pgdata" "$G/pgsock"; chown postgres: "$G/pgdata" "$G/pgsock"
    ( umask 077; printf '%s\n' "$DB_PASSWORD" > "$G/pgpass.tmp"; chown postgres: "$G/pgpass.tmp" )
    as_pg "$bin/initdb" -D "$G/pgdata" -U pulp --pwfile="$G/pgpass.tmp" --auth-local=peer \
      --auth-host=scram-sha-256 >/dev/null
    rm -f "$G/pgpass.tmp"
    printf "listen_addresses = '127.0.0.1'\nport = %s\nunix_socket_directories = '%s'\n" \
      "$PG_PORT" "$G/pgsock" >> "$G/pgdata/postgresql.conf"
  fi
  sed -i '/^port = /d' "$G/pgdata/postgresql.conf"; echo "port = $PG_PORT" >> "$G/pgdata/postgresql.conf"
  touch "$G/log/postgresql.log"; chown postgres: "$G/log/postgresql.log"
  if ! as_pg "$bin/pg_ctl" -D "$G/pgdata" status >/dev/null 2>&1; then
    as_pg "$bin/pg_ctl" -D "$G/pgdata" -l "$G/log/postgresql.log" -w start >/dev/null \
      || die "PostgreSQL did not start: see $G/log/postgresql.log"
  fi
  if ! PGPASSWORD=$DB_PASSWORD "$bin/psql" -h 127.0.0.1 -p "$PG_PORT" -U pulp -d postgres -tAc \
      "SELECT 1 FROM pg_database WHERE datname='pulp'" | grep -q 1; then
    PGPASSWORD=$DB_PASSWORD "$bin/createdb" -h 127.0.0.1 -p "$PG_PORT" -U pulp pulp
  fi
  ( umask 077
    cat > "$G/settings.py" <<EOF
SECRET_KEY = "$SECRET_KEY"
DATABASES = {"default": {"ENGINE": "django.db.backends.postgresql", "NAME": "pulp", "USER": "pulp",
             "PASSWORD": "$DB_PASSWORD", "HOST": "127.0.0.1", "PORT": $PG_PORT}}
DB_ENCRYPTION_KEY = "$G/db.key"
MEDIA_ROOT = "$G/media"
STATIC_ROOT = "$G/static"
WORKING_DIRECTORY = "$G/tmp"
FILE_UPLOAD_TEMP_DIR = "$G/tmp"
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
CONTENT_ORIGIN = "http://127.0.0.1:$CONTENT_PORT"
ANSIBLE_API_HOSTNAME = "http://127.0.0.1:$API_PORT"
ANSIBLE_CONTENT_HOSTNAME = "http://127.0.0.1:$CONTENT_PORT/pulp/content"
EOF
  )
  export PULP_SETTINGS=$G/settings.py PATH=$VENV/bin:$PATH
  local want_db; want_db=$want
  if [ "$(cat "$G/migrated" 2>/dev/null)" != "$want_db" ]; then
    echo "-- pulpcore-manager migrate"
    pulpcore-manager migrate --noinput > "$G/log/migrate.log" 2>&1 \
      || die "migrate failed: see $G/log/migrate.log"
    # The password through the environment, not argv (reset-admin-password takes it as an argument).
    ADMIN_PASSWORD=$ADMIN_PASSWORD pulpcore-manager shell >> "$G/log/migrate.log" 2>&1 <<'PY'
import os
from django.contrib.auth import get_user_model
user, _ = get_user_model().objects.get_or_create(username="admin")
user.is_staff = user.is_superuser = True
user.set_password(os.environ["ADMIN_PASSWORD"])
user.save()
PY
    echo "$want_db" > "$G/migrated"
  fi
  # Each process in its own session, so stop can end it with its children (gunicorn workers).
  if ! running "$G/run/api.pid"; then
    setsid pulpcore-api --bind "127.0.0.1:$API_PORT" --workers 1 > "$G/log/api.log" 2>&1 &
    echo $! > "$G/run/api.pid"
  fi
  if ! running "$G/run/content.pid"; then
    setsid pulpcore-content --bind "127.0.0.1:$CONTENT_PORT" --workers 1 > "$G/log/content.log" 2>&1 &
    echo $! > "$G/run/content.pid"
  fi
  if ! running "$G/run/worker.pid"; then
    # galaxy-importer runs on every upload; scripts/galaxy.sh runs it in full (ansible-doc and
    # ansible-lint) on the tarball once, so the worker skips those two (up to a minute an upload).
    GALAXY_IMPORTER_RUN_ANSIBLE_LINT=false GALAXY_IMPORTER_RUN_ANSIBLE_DOC=false \
      GALAXY_IMPORTER_ANSIBLE_LOCAL_TMP=$G/tmp/ansible \
      setsid pulpcore-worker > "$G/log/worker.log" 2>&1 &
    echo $! > "$G/run/worker.pid"
  fi
  local api="http://127.0.0.1:$API_PORT/pulp/api/v3"
  local i
  for i in $(seq 120); do
    curl -fs -o /dev/null "$api/status/" && break
    running "$G/run/api.pid" || die "pulpcore-api exited: see $G/log/api.log"
    sleep 0.5
  done
  [ "$i" -lt 120 ] || die "pulpcore-api did not answer in 60 s: see $G/log/api.log"
  # One repository with a distribution at BASE_PATH (created once; kept with the database).
  # Credentials from a 0600 curl config, not argv.
  ( umask 077; printf 'user = "admin:%s"\n' "$ADMIN_PASSWORD" > "$G/curl.cfg" )
  local auth=(-K "$G/curl.cfg" -H 'Content-Type: application/json')
  if ! curl -fsS "${auth[@]}" "$api/distributions/ansible/ansible/?base_path=$BASE_PATH" | grep -q '"count":1'; then
    local repo
    repo=$(curl -fsS "${auth[@]}" -X POST -d "{\"name\": \"$BASE_PATH\"}" "$api/repositories/ansible/ansible/" \
      | "$PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["pulp_href"])')
    curl -fsS "${auth[@]}" -X POST -o /dev/null \
      -d "{\"name\": \"$BASE_PATH\", \"base_path\": \"$BASE_PATH\", \"repository\": \"$repo\"}" \
      "$api/distributions/ansible/ansible/"
    for i in $(seq 60); do
      curl -fsS "${auth[@]}" "$api/distributions/ansible/ansible/?base_path=$BASE_PATH" | grep -q '"count":1' && break
      sleep 0.5
    done
  fi
  local url="http://127.0.0.1:$API_PORT/pulp_ansible/galaxy/$BASE_PATH/"
  ( umask 077
    cat > "$G/ansible.cfg" <<EOF
[galaxy]
server_list = local

[galaxy_server.local]
url = $url
username = admin
password = $ADMIN_PASSWORD
EOF
    sed -i '/^GALAXY_URL=/d; /^PULP_API=/d' "$G/env"
    printf 'GALAXY_URL=%s\nPULP_API=%s\n' "$url" "$api" >> "$G/env" )
  echo "galaxy-server: $url (ANSIBLE_CONFIG=$G/ansible.cfg)"
}

case $1 in
  start) start ;;
  stop) stop ;;
  *) usage ;;
esac
