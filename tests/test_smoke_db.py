async def test_database_has_pgvector_and_schema(pool, clean_db):
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        assert (await cur.fetchone())[0] >= "0.8"
        cur = await conn.execute("SELECT count(*) FROM memories")
        assert (await cur.fetchone())[0] == 0
