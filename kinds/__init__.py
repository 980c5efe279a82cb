"""Deployment kinds: one package per kind (`kinds/cassandra/`, `kinds/memcached/`)."""
