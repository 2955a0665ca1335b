"""The fake Kubernetes API server of the controller tests: ``testsupport.fakeapi`` loaded with the
recorded objects of ``tests/fixtures/kube_replay/*.json`` (a Deployment, StatefulSet, Job, CronJob,
HPA, three A100 nodes of a pool, pods on them, two PDBs).

The server itself lives in the product (the demo serves the demo fleet with it); this module keeps
the names the tests import: ``KubeReplay()`` starts it on the fixtures.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from testsupport.fakeapi import FakeKubeAPI, Fault, Recorded, apply_patch, iter_objects, object_path, originals_equal

__all__ = ["FIXTURES", "Fault", "KubeReplay", "Recorded", "apply_patch", "iter_fixture_objects", "object_path",
           "originals_equal"]

FIXTURES = Path(__file__).parent / "fixtures" / "kube_replay"


def iter_fixture_objects(fixtures: Path = FIXTURES) -> Iterator[dict[str, Any]]:
    return iter_objects(fixtures)


class KubeReplay(FakeKubeAPI):
    """Start with ``with KubeReplay() as kube:``; ``kube.api_client()`` is a real ``ApiClient`` to it."""

    def __init__(self, fixtures: Path = FIXTURES, *, validate: bool = True, k8s_version: str = "1.30"):
        super().__init__(iter_objects(fixtures), validate=validate, k8s_version=k8s_version)
