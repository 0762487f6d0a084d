"""Where a command-line client's password comes from: environment, ~/.netrc, a prompt; never argv."""

from __future__ import annotations

import pytest

from strata.cli.credentials import CredentialsError, client_credentials

URL = "http://broker.example:8082"


def test_sources_in_order(tmp_path):
    netrc = tmp_path / "netrc"
    netrc.write_text("machine broker.example login alice password from-netrc\n")
    netrc.chmod(0o600)
    env = {"STRATA_PASSWORD": "from-env"}
    assert client_credentials(URL, "alice", environ=env, netrc_path=str(netrc)) == ("alice", "from-env")
    assert client_credentials(URL, "alice", environ={}, netrc_path=str(netrc)) == ("alice", "from-netrc")
    assert client_credentials(URL, None, environ={}, netrc_path=str(netrc)) == ("alice", "from-netrc")
    asked = client_credentials(URL, "bob", environ={}, netrc_path=str(netrc), prompt=lambda _: "typed")
    assert asked == ("bob", "typed")  # the netrc's login is alice's, not bob's
    assert client_credentials("http://other:8082", None, environ={}, netrc_path=str(netrc)) is None


def test_no_terminal_no_password(tmp_path, monkeypatch):
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    with pytest.raises(CredentialsError, match="STRATA_PASSWORD"):
        client_credentials(URL, "alice", environ={}, netrc_path=str(tmp_path / "none"))
