"""`strata security`: users, passwords, roles and grants, written straight into the metadata
store (whoever may write it is trusted, as in Druid); every node sees a change within its poll
period. Passwords come from a prompt, `STRATA_NEW_PASSWORD` or stdin, never the command line."""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
from pathlib import Path

HELP = "Manage users, passwords, roles and permissions (Druid's basic-security) in the metadata store."
NEW_PASSWORD_ENV = "STRATA_NEW_PASSWORD"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--metadata", default="var/metadata.db", help="metadata store (file or URL)")
    sub = parser.add_subparsers(dest="verb", metavar="ACTION", required=True)
    sub.add_parser("users", help="list users and their roles")
    sub.add_parser("roles", help="list roles and their permissions")
    for verb in ("create-user", "delete-user", "create-role", "delete-role"):
        sub.add_parser(verb, help=verb.replace("-", " ")).add_argument("name")
    pw = sub.add_parser("set-password", help=f"set a password (prompt, ${NEW_PASSWORD_ENV}, or --stdin)")
    pw.add_argument("name")
    pw.add_argument("--stdin", action="store_true", help="read the password from the first line of stdin")
    for verb in ("assign", "unassign"):
        p = sub.add_parser(verb, help=f"{verb} a role to a user")
        p.add_argument("user")
        p.add_argument("role")
    grant = sub.add_parser("grant", help="add a permission to a role")
    grant.add_argument("role")
    grant.add_argument("--type", required=True, choices=["DATASOURCE", "STATE", "CONFIG", "SYSTEM_TABLE"])
    grant.add_argument("--name", required=True, help="regular expression matched against the whole name")
    grant.add_argument("--action", required=True, choices=["READ", "WRITE"])
    revoke = sub.add_parser(
        "set-permissions", help="replace a role's permissions with a JSON file (Druid's shape)"
    )
    revoke.add_argument("role")
    revoke.add_argument("file", help="JSON list of {resource: {name, type}, action}; - for stdin")


def _password(args: argparse.Namespace) -> str:
    if args.stdin:
        return sys.stdin.readline().rstrip("\n")
    from_env = os.environ.get(NEW_PASSWORD_ENV)
    if from_env:
        return from_env
    first = getpass.getpass(f"New password for {args.name}: ")
    if getpass.getpass("Again: ") != first:
        raise ValueError("the passwords differ")
    return first


def run(args: argparse.Namespace) -> int:
    from strata.security.passwords import PasswordRefused
    from strata.security.resources import BadPermission, Permission
    from strata.security.store import AlreadyExists, NotFound, SecurityStoreError, open_security_store

    try:
        store = open_security_store(args.metadata)
    except SecurityStoreError as e:
        print(f"strata security: error: {e}", file=sys.stderr)
        return 2
    try:
        action = args.verb
        if action == "users":
            snap = store.snapshot()
            for user in sorted(snap.credentials):
                print(f"{user}: {', '.join(sorted(snap.user_roles.get(user, ()))) or '(no roles)'}")
        elif action == "roles":
            snap = store.snapshot()
            for role, perms in sorted(snap.roles.items()):
                print(f"{role}: {json.dumps([p.to_json() for p in perms])}")
        elif action == "create-user":
            store.create_user(args.name)
        elif action == "delete-user":
            store.delete_user(args.name)
        elif action == "create-role":
            store.create_role(args.name)
        elif action == "delete-role":
            store.delete_role(args.name)
        elif action == "set-password":
            store.set_password(args.name, _password(args))
        elif action == "assign":
            store.assign(args.user, args.role)
        elif action == "unassign":
            store.unassign(args.user, args.role)
        elif action == "grant":
            held = store.snapshot().roles.get(args.role, ())
            store.set_permissions(args.role, [*held, Permission.of(args.name, args.type, args.action)])
        elif action == "set-permissions":
            text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text(encoding="utf-8")
            store.set_permissions(args.role, [Permission.from_json(p) for p in json.loads(text)])
    except (NotFound, AlreadyExists, BadPermission, PasswordRefused, ValueError, OSError) as e:
        print(f"strata security: error: {e}", file=sys.stderr)
        return 1
    finally:
        store.close()
    return 0
