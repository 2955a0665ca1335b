"""Test doubles and demo scaffolding: never installed, never in the image.

Only a dev checkout has this package (``pyproject.toml`` leaves it out of the wheel): the tests, the
bench and ``gpufinops demo-cluster`` use it.

- :mod:`testsupport.fakeapi` - an in-process Kubernetes-like API server (no auth) for the controller tests.
- :mod:`testsupport.demo_cluster` - the demo fleet as Kubernetes objects, served by the fake API.
- :mod:`testsupport.prometheus_server` - a real local Prometheus loaded with generated series.
- :mod:`testsupport.k8s_synthetic` - a synthetic ``kubectl get -o json`` dump and its ingest throughput.
- :mod:`testsupport.quality_bench` - the quality gate's overhead on synthetic rows.
"""
