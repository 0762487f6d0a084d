"""Where namespaces cannot be made, the multi-host suite says why (pytest prints skip reasons with
-ra), never a silent pass: the reasons themselves, without needing to lack root."""

from __future__ import annotations

import os
import shutil

import pytest

from harness import netns


def test_not_root_is_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/ip")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    why = netns.unavailable()
    assert why is not None and "root" in why and "1000" in why


def test_missing_iproute2_is_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    why = netns.unavailable()
    assert why is not None and "iproute2" in why and "install-system-packages" in why


def test_a_refused_namespace_is_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: str, check: bool = True) -> str:
        raise netns.NetnsError("ip netns add x: Operation not permitted")

    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/ip")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(netns, "_ip", refuse)
    why = netns.unavailable()
    assert why is not None and "Operation not permitted" in why
