#!/bin/sh
# One-shot: tell the coordinator where it and its workers are, and give every node the
# password the nodes use between them (pg_dist_authinfo). Safe to run again: a node
# already added is kept, the password row replaced.
set -eu
: "${POSTGRES_PASSWORD:?}"
export PGUSER=ownsona PGDATABASE=ownsona PGPASSWORD="$POSTGRES_PASSWORD"
for node in citus-coordinator citus-worker1 citus-worker2; do
  psql -h "$node" -v ON_ERROR_STOP=1 -v pw="password=$POSTGRES_PASSWORD" <<'SQL'
DELETE FROM pg_dist_authinfo WHERE nodeid = 0 AND rolename = 'ownsona';
INSERT INTO pg_dist_authinfo (nodeid, rolename, authinfo) VALUES (0, 'ownsona', :'pw');
SQL
done
psql -h citus-coordinator -v ON_ERROR_STOP=1 <<'SQL'
SELECT citus_set_coordinator_host('citus-coordinator', 5432);
SELECT citus_add_node('citus-worker1', 5432);
SELECT citus_add_node('citus-worker2', 5432);
SQL
