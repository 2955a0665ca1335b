"""Changes: the lifecycle from a recommendation (or an API request) to an applied, verified change,
with policy gates (YAML), approvals and a hash-chained, append-only audit log.

Middle floor: imports the kernel (``gpufinops``) and other middle parts, never a face.
"""

from __future__ import annotations

__all__: list[str] = []
