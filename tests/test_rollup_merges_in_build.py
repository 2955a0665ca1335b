"""An hour that two raw files hold is merged by the build, not passed through twice (macro
multi_file_hours): the models that read the rollups pass an hour's rows through as they are only when
one file holds that hour, which they learn from the staging views' `source_file`.

The small lake's first two hours land in one run; then a second source lands more DCGM and usage
samples of train-a's device and container for the second hour only (at +30 s of each minute), so that
hour is in two files and the first is in one. An incremental build and a fresh full build of that lake
must both count every sample once, in one row per key.
"""

from __future__ import annotations

import importlib.util
import shutil
from datetime import timedelta
from pathlib import Path

import duckdb
import pytest

from gpufinops.settings import Settings
from ingest.lake import LakeWriter
from testsupport.warehouse_compare import assert_same_tables

_FIXTURE = Path(__file__).parent / "fixtures" / "warehouse" / "small_lake.py"
_spec = importlib.util.spec_from_file_location("warehouse_small_lake_multi_file", _FIXTURE)
lake = importlib.util.module_from_spec(_spec)
assert _spec.loader is not None
_spec.loader.exec_module(lake)

pytestmark = pytest.mark.timeout(600)

HOUR2 = lake.T0 + timedelta(hours=1)
EXTRA_UTIL = 0.75  # train-a's base series is 0.5 busy; the second file's samples 0.75 (exact in float32)
EXTRA_CPU = 5.0  # its container uses 3.0 cores in the base series, 5.0 in the second file's


def _land_second_file(lake_dir: Path) -> None:
    minutes = [HOUR2 + timedelta(minutes=m, seconds=30) for m in range(60)]
    node, gpu, uuid, _, _, ns, pod, _, _, _ = lake.SAMPLES[0]
    w = LakeWriter(lake_dir)
    w.write("gpu_samples", [{"ts": t, "hostname": node, "gpu": gpu, "uuid": uuid, "model_name": "x",
                             "namespace": ns, "pod": pod, "container": "main", "gr_engine_active": EXTRA_UTIL}
                            for t in minutes],
            source="dcgm_second", cluster=lake.CLUSTER, window_start=HOUR2, window_end=HOUR2 + timedelta(hours=1))
    w.write("container_usage", [{"ts": t, "namespace": ns, "pod": pod, "container": "main", "cpu_cores": EXTRA_CPU,
                                 "memory_working_set_bytes": 5.0 * lake.GIB} for t in minutes],
            source="usage_second", cluster=lake.CLUSTER, window_start=HOUR2, window_end=HOUR2 + timedelta(hours=1))


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    from transform import run_build

    inc = Settings(home=tmp_path_factory.mktemp("multi-inc"))
    lake.write_small_lake(inc.lake_dir, start=lake.T0, hours=2)
    run_build(inc, full_refresh=True)
    _land_second_file(inc.lake_dir)
    run_build(inc)
    full = Settings(home=tmp_path_factory.mktemp("multi-full"))
    shutil.copytree(inc.lake_dir, full.lake_dir)
    run_build(full, full_refresh=True)
    return inc, full


def _rows(settings: Settings, sql: str) -> list[tuple]:
    with duckdb.connect(str(settings.warehouse_path), read_only=True) as con:
        return con.execute(sql).fetchall()


@pytest.mark.parametrize("which", ["incremental", "full"])
def test_the_hour_two_files_hold_counts_every_sample_once(builds, which):
    s = builds[0] if which == "incremental" else builds[1]
    # the staging view knows the two files of the second hour
    assert _rows(s, "select hour, count(distinct source_file) from stg_dcgm__gpu_hourly "
                    "where pod = 'train-a' group by hour order by hour") == [
        (lake.T0.replace(tzinfo=None), 1), (HOUR2.replace(tzinfo=None), 2)]
    usage = _rows(s, "select hour, samples, round(utilization, 9) from int_gpu_usage_hourly "
                     "where pod = 'train-a' order by hour")
    assert usage == [(lake.T0.replace(tzinfo=None), 60, 0.5),
                     (HOUR2.replace(tzinfo=None), 120, round((0.5 + EXTRA_UTIL) / 2, 9))]
    evidence = _rows(s, "select hour, samples, list_sum([e.n for e in util_hist]) from fct_gpu_device_evidence_hourly "
                        "where pod = 'train-a' order by hour")
    assert evidence == [(lake.T0.replace(tzinfo=None), 60, 60), (HOUR2.replace(tzinfo=None), 120, 120)]
    cpu = _rows(s, "select hour, round(cpu_usage_cores, 9) from int_container_usage_hourly "
                   "where pod = 'train-a' order by hour")
    assert cpu == [(lake.T0.replace(tzinfo=None), 3.0), (HOUR2.replace(tzinfo=None), round((3.0 + EXTRA_CPU) / 2, 9))]
    # the VPA evidence: the container's two parts of the second hour are one pod, whose memory peak
    # counts once (the larger file's), and whose CPU samples all count
    vpa = _rows(s, "select hour, samples, pods, list_sum([e.n for e in cpu_hist]), list_sum([e.n for e in memory_hist]), "
                   "memory_peak_bytes from fct_container_usage_hourly where namespace = 'ml' and container = 'main' "
                   "order by hour")
    assert [(h, n, pods, cpu_n, mem_n) for h, n, pods, cpu_n, mem_n, _ in vpa] == [
        (lake.T0.replace(tzinfo=None), 60, 1, 60, 1), (HOUR2.replace(tzinfo=None), 120, 1, 120, 1)]
    assert vpa[1][5] == 5.0 * lake.GIB


def test_incremental_equals_full_with_an_hour_in_two_files(builds):
    inc, full = builds
    assert_same_tables(inc.warehouse_path, full.warehouse_path,
                       {"int_mig_idle_instances_hourly", "fct_gpu_device_evidence_hourly", "int_container_usage_hourly",
                        "fct_container_usage_hourly"})
