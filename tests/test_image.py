"""The container image: `make image` builds the Dockerfile for real (buildah, no daemon) and the
product runs inside it (`buildah run --isolation chroot`): version, a 1-day demo and its build, the API
and the dashboards answering from the host, as the non-root user, writing only to the home volume,
with no test doubles or dev packages installed.

Skips (loudly) only where buildah itself cannot run.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb
import httpx
import pytest
import yaml

from ingest.demo.generate import default_data_dir

REPO = Path(__file__).resolve().parents[1]
HOME_IN = "/var/lib/gpufinops"  # GPUFINOPS_HOME in the image, the volume in deploy/
UID = 10001
DATA_IN = f"{HOME_IN}/demo-traces"  # the demo traces, mounted read-only (inside the home: no mount point on the root)
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
VERSION = PYPROJECT["project"]["version"]
DBT_PROJECT_PARTS = ("models", "macros", "seeds", "tests/dbt")


def test_the_wheel_carries_every_file_of_the_dbt_project() -> None:
    """pyproject's data-files list (what the image's dbt runs) covers the whole dbt project."""
    listed: dict[str, str] = {}
    for target, patterns in PYPROJECT["tool"]["setuptools"]["data-files"].items():
        for pattern in patterns:
            for path in glob.glob(str(REPO / pattern)):
                rel = Path(path).relative_to(REPO)
                listed[str(rel)] = target
                assert target == str(Path("share/gpufinops/dbt") / rel.parent).rstrip("/."), (rel, target)
    project = {"dbt_project.yml", "profiles.yml"}
    for part in DBT_PROJECT_PARTS:
        project |= {str(p.relative_to(REPO)) for p in (REPO / part).rglob("*")
                    if p.is_file() and p.name != "README.md" and "__pycache__" not in p.parts}
    assert project - set(listed) == set(), "add these to [tool.setuptools.data-files] in pyproject.toml"
    assert "models/marts/fct_showback_daily.sql" in listed and "tests/dbt/assert_cost_conservation.sql" in listed


def test_the_wheel_leaves_out_test_doubles_and_bench() -> None:
    include = PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
    assert not any(p.startswith(("testsupport", "bench", "tests")) for p in include), include
    for module in ("controller/fakeapi.py", "controller/demo_cluster.py", "ingest/prometheus/localserver.py",
                   "ingest/k8s/synthetic.py", "ingest/quality/bench.py"):
        assert not (REPO / module).exists(), f"{module} belongs in testsupport/"


def test_the_dockerfile_copies_every_shipped_package() -> None:
    include = PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
    copied = set(re.findall(r"^COPY (\S+) \1$", (REPO / "Dockerfile").read_text(), flags=re.M))
    missing = {p.rstrip("*") for p in include} - copied
    assert missing == set(), f"the Dockerfile's wheel stage must COPY these packages too: {sorted(missing)}"


def test_demo_cluster_without_the_test_support_package_says_it_needs_a_checkout(monkeypatch, tmp_path) -> None:
    from typer.testing import CliRunner

    from cli.main import app

    for name in [m for m in sys.modules if m == "testsupport" or m.startswith("testsupport.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "testsupport", None)  # as in the wheel: not importable
    res = CliRunner().invoke(app, ["--home", str(tmp_path), "demo-cluster", "--once"])
    assert res.exit_code == 2 and "only in a dev checkout" in res.output


# -- the built image ------------------------------------------------------------------------------


def _buildah_problem() -> str | None:
    if shutil.which("buildah") is None:
        return "buildah is not installed (`make system-deps` installs it)"
    proc = subprocess.run(["buildah", "info"], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        return f"buildah cannot run here: {(proc.stderr or proc.stdout).strip()[:400]}"
    return None


@dataclass(frozen=True)
class Image:
    name: str
    container: str
    home: Path  # host folder bind-mounted at HOME_IN
    started: int  # epoch seconds before the first product command ran in the container

    def argv(self, *args: str, env: dict[str, str] | None = None, volumes: dict[Path, str] | None = None) -> list[str]:
        envs = [f"--env={k}={v}" for k, v in (env or {}).items()]
        mounts = [f"--volume={host}:{inside}:ro" for host, inside in (volumes or {}).items()]
        return ["buildah", "run", "--isolation", "chroot", "--volume", f"{self.home}:{HOME_IN}", *mounts, *envs,
                self.container, "--", *args]

    def run(self, *args: str, env: dict[str, str] | None = None, volumes: dict[Path, str] | None = None,
            timeout: int = 600, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(self.argv(*args, env=env, volumes=volumes), capture_output=True, text=True,
                              timeout=timeout)
        if check and proc.returncode != 0:
            pytest.fail(f"in the image, `{' '.join(args)}` exited {proc.returncode}:\n{proc.stdout[-3000:]}\n"
                        f"{proc.stderr[-3000:]}")
        return proc


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Image]:
    problem = _buildah_problem()
    if problem:
        message = f"THE IMAGE WAS NOT BUILT OR RUN: {problem}"
        warnings.warn(message, stacklevel=1)
        print(f"\nWARNING: {message}\n")
        pytest.skip(message)
    started = time.monotonic()
    proc = subprocess.run(["bash", str(REPO / ".ci" / "build-image")], cwd=REPO, capture_output=True, text=True,
                          timeout=1800)
    if proc.returncode != 0:
        pytest.fail(f"make image failed ({proc.returncode}):\n{proc.stderr[-5000:]}")
    name = proc.stdout.strip().splitlines()[-1]
    print(f"\n{proc.stderr.strip()}\n(image fixture: {time.monotonic() - started:.0f} s)")
    container = f"gpufinops-test-{os.getpid()}"
    subprocess.run(["buildah", "rm", container], capture_output=True)
    subprocess.run(["buildah", "from", "--pull=never", "--name", container, name], check=True, capture_output=True,
                   timeout=300)
    home = tmp_path_factory.mktemp("image-home")
    os.chown(home, UID, UID)
    # buildah sets the container's root up (its mtime) on the first run: start the clock after it
    subprocess.run(["buildah", "run", "--isolation", "chroot", container, "--", "true"], check=True, timeout=300)
    time.sleep(1.1)
    try:
        yield Image(name=name, container=container, home=home, started=int(time.time()))
    finally:
        subprocess.run(["buildah", "rm", container], capture_output=True, timeout=300)


def test_the_image_runs_as_non_root_with_one_entrypoint(image: Image) -> None:
    inspect = subprocess.run(["buildah", "inspect", "--type", "image", image.name], capture_output=True, text=True,
                             check=True).stdout
    config = json.loads(inspect)["OCIv1"]["config"]
    assert config["User"] == f"{UID}:{UID}" and config["Entrypoint"] == ["gpufinops"]
    assert f"GPUFINOPS_HOME={HOME_IN}" in config["Env"] and f"HOME={HOME_IN}" in config["Env"]
    assert image.run("id", "-u").stdout.strip() == str(UID)
    assert image.run("id", "-g").stdout.strip() == str(UID)
    assert image.run("gpufinops", "--version").stdout.strip() == f"gpufinops {VERSION}"


def test_the_prod_overlay_names_the_built_image(image: Image) -> None:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed")
    out = subprocess.run(["kubectl", "kustomize", str(REPO / "deploy/overlays/prod")], check=True,
                         capture_output=True, text=True, timeout=60).stdout
    images = set()
    for obj in yaml.safe_load_all(out):
        spec = (obj or {}).get("spec", {})
        pod = spec.get("jobTemplate", {}).get("spec", spec).get("template", {}).get("spec", {})
        images |= {c["image"] for c in pod.get("containers", [])}
    assert images == {image.name}


def test_the_image_holds_no_test_doubles_nor_dev_packages(image: Image) -> None:
    script = (
        "import importlib.util, pathlib, sys\n"
        "absent = ['testsupport', 'bench', 'tests', 'pytest', 'hypothesis', 'schemathesis', 'ruff', 'mypy', 'aiosmtpd', 'pip']\n"
        "present = [m for m in absent if importlib.util.find_spec(m) is not None]\n"
        "names = {'fakeapi.py', 'localserver.py', 'synthetic.py', 'prometheus_server.py', 'k8s_synthetic.py', 'quality_bench.py'}\n"
        "doubles = ('class FakeKubeAPI', 'class LocalPrometheus', 'def synthetic_dump', 'def build_demo_cluster')\n"
        "site = pathlib.Path(sys.prefix)\n"
        "files = sorted(str(p) for p in site.rglob('*.py') if p.name in names or (p.name == 'demo_cluster.py' and p.parent.name != 'commands'))\n"
        "ours = [site / 'lib/python3.11/site-packages' / d for d in ('gpufinops', 'cli', 'ingest', 'exports', 'transform', 'recommender', 'simulator', 'changes', 'controller', 'api', 'dashboards', 'reports')]\n"
        "files += sorted(str(p) for d in ours for p in d.rglob('*.py') if any(t in p.read_text() for t in doubles))\n"
        "import gpufinops.project as tp, cli.main\n"
        "print(present, files, tp.PROJECT_DIR, sep='\\n')\n"
    )
    present, files, project_dir = image.run("python3", "-c", script).stdout.strip().splitlines()
    assert present == "[]", f"in the image: {present}"
    assert files == "[]", f"test doubles in the image: {files}"
    assert project_dir == "/opt/gpufinops/share/gpufinops/dbt"
    refused = image.run("gpufinops", "demo-cluster", "--once", check=False)
    assert refused.returncode != 0 and "only in a dev checkout" in refused.stdout + refused.stderr


@pytest.fixture(scope="module")
def built(image: Image) -> Image:
    """A 1-day tiny demo and its build, run inside the image into the home volume."""
    # the public traces the demo samples live beside the repository, not in the image: mount them
    data = default_data_dir()
    if not (data / "openb").is_dir():
        pytest.fail(f"the demo traces are missing at {data}")
    # copied into the home volume (3.5 MB), not bind-mounted inside it: no nested mount to go wrong
    traces = image.home / Path(DATA_IN).relative_to(HOME_IN)
    shutil.copytree(data, traces, dirs_exist_ok=True)
    for path in [traces, *traces.rglob("*")]:
        os.chown(path, UID, UID)
    demo = image.run("gpufinops", "demo", "--days", "1", "--nodes", "12", "--clusters", "2", "--seed", "42",
                     "--start", "2026-11-01", "--data-dir", DATA_IN, "--workers", "1")
    if not (image.home / "lake").is_dir():
        listing = sorted(str(p.relative_to(image.home)) for p in image.home.iterdir())
        pytest.fail(f"`gpufinops demo` exited 0 in the image but no lake is in the home volume {image.home} "
                    f"(it holds {listing}):\n{demo.stdout[-3000:]}\n{demo.stderr[-3000:]}")
    out = image.run("gpufinops", "build")
    assert (image.home / "warehouse.duckdb").is_file(), out.stdout
    return image


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def _serving(image: Image, args: list[str], env: dict[str, str], health: str) -> Iterator[None]:
    """Start a server inside the image; wait until `health` (a host URL) answers 200."""
    log = image.home.parent / f"{args[1]}-server.log"
    with log.open("w") as out:
        proc = subprocess.Popen(image.argv(*args, env=env), stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                pytest.fail(f"`{' '.join(args)}` exited {proc.returncode} in the image:\n{log.read_text()[-4000:]}")
            try:
                if httpx.get(health, timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"{health} never answered 200:\n{log.read_text()[-4000:]}")
            time.sleep(0.5)
        yield
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def test_the_api_in_the_image_answers_health_and_an_authenticated_cost_request(built: Image) -> None:
    created = built.run("gpufinops", "api", "token", "create", "--name", "image-test", "--role", "finance")
    token = created.stdout.strip().splitlines()[-1]
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    # PORT, not --port: the container platforms' way
    with _serving(built, ["gpufinops", "serve", "api", "--host", "127.0.0.1"], {"PORT": str(port)}, f"{base}/healthz"):
        assert httpx.get(f"{base}/v1/showback", timeout=30).status_code == 401
        res = httpx.get(f"{base}/v1/showback", params={"group_by": "team"},
                        headers={"Authorization": f"Bearer {token}"}, timeout=60)
        assert res.status_code == 200, res.text
        body = res.json()
    with duckdb.connect(str(built.home / "warehouse.duckdb"), read_only=True) as con:
        frm, to = body["from"], body["to"]
        expected = con.execute("select sum(chargeback_usd) from fct_showback_daily where day between ? and ?",
                               [frm, to]).fetchone()[0]
    assert body["lines"] and body["total_chargeback_usd"] > 0
    assert body["total_chargeback_usd"] == pytest.approx(float(expected), abs=0.01 * len(body["lines"]))


def test_the_dashboard_in_the_image_answers_its_health_endpoint(built: Image) -> None:
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    with _serving(built, ["gpufinops", "serve", "dashboard", "--host", "127.0.0.1"], {"PORT": str(port)},
                  f"{base}/_stcore/health"):
        assert httpx.get(f"{base}/_stcore/health", timeout=30).text.strip() == "ok"
        page = httpx.get(f"{base}/", timeout=30)
        assert page.status_code == 200 and "<html" in page.text.lower()


def test_everything_the_image_wrote_is_in_the_home_volume(built: Image) -> None:
    """After the demo, the build and both servers: no file outside the home changed (so
    readOnlyRootFilesystem works; /tmp is an emptyDir in deploy/ and is reported, not required)."""
    proc = built.run("find", "/", "(", "-path", "/proc", "-o", "-path", "/sys", "-o", "-path", "/dev", "-o",
                     "-path", HOME_IN, ")", "-prune", "-o", "-newermt", f"@{built.started}", "-print", check=False)
    # buildah run itself bind-mounts these per run
    runtime = {"/etc/hosts", "/etc/resolv.conf", "/etc/hostname", "/run", "/run/.containerenv"}
    changed = sorted(set(proc.stdout.split()) - runtime)
    outside = [p for p in changed if p != "/tmp" and not p.startswith("/tmp/")]
    assert outside == [], f"the image wrote outside {HOME_IN}: {outside}"
    assert (built.home / "dbt").is_dir() and (built.home / "lake").is_dir()
