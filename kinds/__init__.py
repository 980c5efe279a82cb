"""The deployment kinds' operations: one package per kind (`kinds/<name>/`), each exporting its
`control.kind.DeploymentKind` subclass, which its row of `simulation.kinds.KINDS` names (`operations`,
`kinds.<name>:<Class>`) and `control.kinds.operations(name)` resolves.

A kind's package holds everything of the kind's own above the simulation layer: its connection and body rules,
discovery and calibration of its live system, the model it builds from what they found, its publisher, what the
verify step reads from it, and its capture where it has one. It sits between `jobs | service` and `control` in
the layers: it imports the control plane, which never imports it; the jobs, the service and the CLI reach it
through `operations(kind)`, and import a kind's module directly only where the code is that kind's alone
(`tailtune capture memcached`).
"""

from __future__ import annotations
