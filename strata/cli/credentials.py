"""Who a command-line client says it is: `--user`, its password from `STRATA_PASSWORD`, the
user's ~/.netrc (as curl's --netrc reads it) or a prompt; never from the command line."""

from __future__ import annotations

import getpass
import netrc
import os
import sys
from collections.abc import Callable, Mapping
from urllib.parse import urlsplit

PASSWORD_ENV = "STRATA_PASSWORD"


class CredentialsError(ValueError):
    """No password could be found for the user (and no terminal to ask on)."""


def _from_netrc(url: str, user: str | None, path: str | None) -> tuple[str, str] | None:
    host = urlsplit(url).hostname or ""
    try:
        entry = netrc.netrc(path).authenticators(host)
    except (FileNotFoundError, netrc.NetrcParseError, OSError):
        return None
    if entry is None:
        return None
    login, _, password = entry
    if not login or password is None or (user is not None and login != user):
        return None
    return login, password


def client_credentials(
    url: str,
    user: str | None,
    *,
    environ: Mapping[str, str] | None = None,
    netrc_path: str | None = None,
    prompt: Callable[[str], str] | None = None,
) -> tuple[str, str] | None:
    """(user, password) for Basic authentication, or None to send none."""
    environ = os.environ if environ is None else environ
    if user is None:
        return _from_netrc(url, None, netrc_path)
    password = environ.get(PASSWORD_ENV)
    if password:
        return user, password
    found = _from_netrc(url, user, netrc_path)
    if found is not None:
        return found
    if prompt is None:
        if not sys.stdin.isatty():
            raise CredentialsError(
                f"no password for {user}: set {PASSWORD_ENV}, add it to ~/.netrc, or use a terminal"
            )
        prompt = getpass.getpass
    return user, prompt(f"Password for {user}: ")
