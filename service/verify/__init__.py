"""/api/v1/deployments/{id}/verify: check a published version on demand (the worker does it)."""
