"""Cassandra deployments: CQL connections (`cql`), discovery (`discovery`), calibration (`calibration`), the model
(`model`), the publisher (`publisher`) and the stock table options it applies (`stock`), behind `Cassandra`."""

from __future__ import annotations

from kinds.cassandra.kind import Cassandra

__all__ = ["Cassandra"]
