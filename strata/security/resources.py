"""Druid's authorization vocabulary: resources, actions, and permissions over them.

A permission's resource name is a regular expression matched against the WHOLE name (Druid's
`Pattern.matches`), so a grant on `wikipedia` says nothing about `wikipedia_live`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple


class ResourceType(StrEnum):
    DATASOURCE = "DATASOURCE"
    STATE = "STATE"
    CONFIG = "CONFIG"
    SYSTEM_TABLE = "SYSTEM_TABLE"
    EXTERNAL = "EXTERNAL"  # reading external data in SQL ingestion (EXTERN and its kin)


class Action(StrEnum):
    READ = "READ"
    WRITE = "WRITE"


class Resource(NamedTuple):
    """A tuple, so making and hashing one costs next to nothing on the query path."""

    name: str
    type: ResourceType


# the resource Druid's STATE and CONFIG checks name (one cluster-wide state, one config)
STATE = Resource("STATE", ResourceType.STATE)
CONFIG = Resource("CONFIG", ResourceType.CONFIG)
SECURITY_CONFIG = Resource("security", ResourceType.CONFIG)
EXTERNAL = Resource("EXTERNAL", ResourceType.EXTERNAL)  # what Druid's EXTERN asks READ on


def datasource(name: str) -> Resource:
    return Resource(name, ResourceType.DATASOURCE)


class BadPermission(ValueError):
    """A permission document that is not Druid's shape (the API answers it with 400)."""


@dataclass(frozen=True, slots=True)
class Permission:
    pattern: str
    type: ResourceType
    action: Action
    _compiled: re.Pattern[str] = field(compare=False, repr=False, hash=False)

    @classmethod
    def of(cls, pattern: str, type: ResourceType | str, action: Action | str) -> Permission:
        try:
            compiled = re.compile(pattern)
            return cls(pattern, ResourceType(type), Action(action), compiled)
        except re.error as e:
            raise BadPermission(f"resource name [{pattern}] is not a valid regular expression: {e}") from None
        except ValueError as e:
            raise BadPermission(str(e)) from None

    @classmethod
    def from_json(cls, obj: Any) -> Permission:
        """`{"resource": {"name": REGEX, "type": TYPE}, "action": "READ"|"WRITE"}` as Druid."""
        if not isinstance(obj, dict) or not isinstance(obj.get("resource"), dict):
            raise BadPermission("a permission is {resource: {name, type}, action}")
        res = obj["resource"]
        name, type_, action = res.get("name"), res.get("type"), obj.get("action")
        if not isinstance(name, str) or not isinstance(type_, str) or not isinstance(action, str):
            raise BadPermission("a permission needs resource.name, resource.type and action as strings")
        if type_ not in ResourceType.__members__:
            raise BadPermission(f"unknown resource type [{type_}]; one of {', '.join(ResourceType)}")
        if action not in Action.__members__:
            raise BadPermission(f"unknown action [{action}]; READ or WRITE")
        return cls.of(name, type_, action)

    def to_json(self) -> dict[str, Any]:
        return {"resource": {"name": self.pattern, "type": str(self.type)}, "action": str(self.action)}

    def allows(self, resource: Resource, action: Action) -> bool:
        return (
            self.action is action
            and self.type is resource.type
            and self._compiled.fullmatch(resource.name) is not None
        )


def admin_permissions() -> list[Permission]:
    """Everything on every resource type: Druid's default `admin` role."""
    return [Permission.of(".*", t, a) for t in ResourceType for a in Action]
