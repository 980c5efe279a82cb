"""The control plane's state, below both the REST API (`service`) and the worker (`jobs`): the metadata DB,
the job queue's producer side, config versions, cron slot arithmetic, the publishers and the domain errors.
"""

from __future__ import annotations
