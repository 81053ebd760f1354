#!/bin/bash
# docker-compose.ha.yml: run once by the pgvector image's entrypoint when the primary's
# data directory is first created. The standby streams as `replicator`.
set -euo pipefail
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
    -v password="$REPLICATION_PASSWORD" \
    -c "CREATE ROLE replicator WITH REPLICATION LOGIN PASSWORD :'password'"
echo "host replication replicator all scram-sha-256" >> "$PGDATA/pg_hba.conf"
