#!/bin/bash
# docker-compose.ha.yml: the standby. On first start its data directory is a base backup
# of the primary (pg_basebackup -R writes standby.signal and primary_conninfo); later
# starts find it there. `application_name=standby` is the name the primary's
# synchronous_standby_names waits for. After a promotion (docs/production.md, "Two machines"), the
# old primary's volume must be emptied before it may come back, as a standby of the new one.
set -euo pipefail
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    mkdir -p "$PGDATA"
    chown postgres:postgres "$PGDATA"
    chmod 700 "$PGDATA"
    until gosu postgres pg_isready -h "$PRIMARY_HOST" -U "$POSTGRES_USER" -d "$POSTGRES_DB"; do
        sleep 1
    done
    PGPASSWORD="$REPLICATION_PASSWORD" gosu postgres pg_basebackup \
        -h "$PRIMARY_HOST" -U replicator -D "$PGDATA" -X stream -R -c fast
    echo "primary_conninfo = 'host=$PRIMARY_HOST user=replicator password=$REPLICATION_PASSWORD application_name=standby'" \
        >> "$PGDATA/postgresql.auto.conf"
fi
exec docker-entrypoint.sh postgres -c hot_standby=on -c hot_standby_feedback=on
