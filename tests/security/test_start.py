"""Secure by default at start-up: a node with no authenticator binds loopback only unless told
`--insecure`; secrets come from the config file or the environment."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pytest

from strata.security.settings import SecurityConfigError, add_security_flags, security_settings


def _args(*argv: str, config: dict | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bind", default="127.0.0.1")
    add_security_flags(parser, metadata=True)
    args = parser.parse_args(argv)
    args._config = config or {}
    return args


def test_loopback_needs_nothing():
    assert not security_settings(_args(), "broker", environ={}).enabled


@pytest.mark.parametrize("address", ["0.0.0.0", "10.1.2.3", "::"])
def test_other_addresses_need_an_authenticator_or_insecure(address):
    with pytest.raises(SecurityConfigError, match="--insecure"):
        security_settings(_args("--bind", address), "broker", environ={})
    assert not security_settings(_args("--bind", address, "--insecure"), "broker", environ={}).enabled
    on = security_settings(
        _args("--bind", address, "--authenticator", "basic", "--metadata", "m.db"), "broker", environ={}
    )
    assert on.enabled


def test_passwords_from_config_then_environment_never_flags():
    config = {"security": {"admin-password": "from-config"}, "broker": {"internal_password": "from-section"}}
    s = security_settings(_args("--authenticator", "basic", "--metadata", "m.db", config=config), "broker",
                          environ={"STRATA_ADMIN_PASSWORD": "env", "STRATA_INTERNAL_PASSWORD": "env-internal"})  # fmt: skip
    assert (s.admin_password, s.internal_password) == ("from-config", "from-section")
    s = security_settings(_args("--authenticator", "basic", "--metadata", "m.db"), "broker",
                          environ={"STRATA_ADMIN_PASSWORD": "env"})  # fmt: skip
    assert s.admin_password == "env" and "env" not in repr(s)
    with pytest.raises(SystemExit):
        _args("--admin-password", "x")


def test_an_authenticator_needs_a_store():
    with pytest.raises(SecurityConfigError, match="--metadata"):
        security_settings(_args("--authenticator", "basic"), "broker", environ={})


@pytest.mark.parametrize("command", ["broker", "historical"])
def test_a_node_refuses_to_start_open_on_a_wildcard_address(command, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_")}
    extra = ["--nodes", "127.0.0.1:9"] if command == "broker" else ["--metadata", str(tmp_path / "m.db")]
    proc = subprocess.run([sys.executable, "-m", "strata.cli.main", command, "--bind", "0.0.0.0", "--port", "1", *extra],
                          env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 2
    assert "refusing to bind 0.0.0.0 with no authenticator" in proc.stderr


def test_tls_flags_go_together_and_name_files(tmp_path):
    with pytest.raises(SecurityConfigError, match="together"):
        security_settings(_args("--tls-cert", str(tmp_path)), "broker", environ={})
    with pytest.raises(SecurityConfigError, match="no such file"):
        security_settings(_args("--tls-ca", str(tmp_path / "missing.pem")), "broker", environ={})
