"""Cassandra's full query log: the binary log directory (`cassandra-fql`, `binlog.py`, read through
`FqlReader.java`) and the text of `fqltool dump` (`cassandra-fql-dump`, `dump.py`), both turned into multiget
requests by `records.py` with the statements read by `cql.py` and the partition keys decoded by `keys.py`
(docs/formats.md § cassandra-fql)."""
