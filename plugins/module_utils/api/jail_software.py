# -*- coding: utf-8 -*-
# Copyright: soperator.slurm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a change to a jail may ask (the role jail_software): Debian packages, apt sources, Python virtual
environments, profile snippets, environment modules, files, local users and groups. Pure: :func:`plan` judges the
role's variables as a whole before anything is written (every problem names its variable) and says what the role's
tasks do, each file with the path it writes.

Never what the product owns in the jail (``slurm/paths.py`` ``jail_owner``: Slurm's configuration link, its clients
and plugins the pods bind, munge, the pods' runtime directories, the images' marks, the NVIDIA tools' links, and the
Slurm client files the jail's own list names), its packages (``JAIL_OWNED_PACKAGES``), or the images' accounts
(``slurm/accounts.py``: their names and ids): those are refused, naming them.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import re
from typing import Any, Dict, Iterable, List, Mapping, Sequence, Tuple

from ansible_collections.soperator.slurm.plugins.module_utils.slurm import accounts, paths

APT_DIR = "/etc/apt"
APT_SOURCES_DIR = APT_DIR + "/sources.list.d"
PROFILE_DIR = "/etc/profile.d"
MODULEFILES_DIR = "/usr/share/modules/modulefiles"  # Debian's environment-modules (its modulespath lists it)
REQUIREMENTS_FILE = "requirements.txt"  # in the environment's directory
FILE_STATES = ("file", "directory", "link", "absent")
STATES = ("present", "absent")
# What environments need: `python3 -m venv` (Debian's python3-venv), and the pip module's own import (packaging).
VENV_PACKAGES = ("python3-venv", "python3-packaging")
# The query the role asks dpkg (one line a package: name, status abbreviation, version) and reads with
# :func:`missing_packages`.
DPKG_QUERY_FORMAT = "${Package}\t${db:Status-Abbrev}\t${Version}\n"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,62}")
_ACCOUNT = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
_PACKAGE = re.compile(r"[a-z0-9][a-z0-9.+-]+(:[a-z0-9-]+)?(=[A-Za-z0-9.+~:-]+)?")
_MODE = re.compile(r"0?[0-7]{3,4}")
# The role's variables (names without jail_software_) and their entries, as given: judged here, so of any type.
Request = Mapping[str, Any]
Entry = Tuple[str, Any]  # (the variable's path, e.g. jail_software_files[2]; its value)
# One operation of :func:`plan`'s result for the role's tasks (a file, an environment, a user, a group).
Item = Dict[str, Any]


def _entries(request: Request, key: str, problems: List[str]) -> list[Entry]:
    value = request.get(key) or []
    if not isinstance(value, list):
        problems.append("jail_software_%s: a list, not %r" % (key, type(value).__name__))
        return []
    found: list[Entry] = []
    for index, entry in enumerate(value):
        where = "jail_software_%s[%d]" % (key, index)
        if key in ("packages", "packages_absent"):
            found.append((where, entry))
        elif not isinstance(entry, dict):
            problems.append("%s: a dictionary, not %r" % (where, entry))
        else:
            found.append((where, entry))
    return found


def _path_problem(where: str, path: object, image_paths: Sequence[str], replacing: bool = False) -> str | None:
    if not isinstance(path, str) or not paths.normalised(path):
        return "%s: %r is not a normalised absolute path" % (where, path)
    owner = paths.jail_owner(path, image_paths, replacing)
    if owner:
        return "%s: %s; refused (nothing was changed)" % (where, owner)
    return None


def _state(where: str, entry: Mapping[str, Any], states: Sequence[str], problems: List[str]) -> str:
    state = entry.get("state") or states[0]
    if state not in states:
        problems.append("%s.state: %r is none of %s" % (where, state, ", ".join(states)))
    return state


def _file(where: str, entry: Mapping[str, Any], dest: object, state: str, problems: List[str],
          image_paths: Sequence[str], var: str = "dest", kind: str = "file") -> Item | None:
    """A file operation for the role's copy/file tasks, or None (its problem recorded)."""
    problem = _path_problem("%s.%s" % (where, var), dest, image_paths, replacing=state in ("absent", "link"))
    if problem:
        problems.append(problem)
        return None
    mode = entry.get("mode")
    if mode is not None and not _MODE.fullmatch(str(mode)):
        problems.append("%s.mode: %r is not an octal mode such as '0644'" % (where, mode))
    item: Item = {"dest": dest, "state": state, "owner": entry.get("owner") or "root",
                  "group": entry.get("group") or "root", "mode": None if mode is None else str(mode), "var": where,
                  "kind": kind}
    if state == "file":
        given = [k for k in ("content", "src") if entry.get(k) is not None]
        if len(given) != 1:
            problems.append("%s: give exactly one of content and src" % where)
            return None
        item[given[0]] = entry[given[0]]
    elif state == "link":
        target = entry.get("target")
        if not isinstance(target, str) or not target:
            problems.append("%s.target: a link needs its target" % where)
            return None
        item["target"] = target
    return item


def _named_file(where: str, entry: Mapping[str, Any], directory: str, suffix: str, problems: List[str],
                image_paths: Sequence[str], kind: str, nested: bool = False) -> Item | None:
    name = entry.get("name")
    parts = str(name or "").split("/") if nested else [str(name or "")]
    if not name or not all(_NAME.fullmatch(p) for p in parts):
        problems.append("%s.name: %r is not a name (letters, digits, '.', '_', '+', '-'%s)"
                        % (where, name, "; '/' between versions" if nested else ""))
        return None
    state = _state(where, entry, STATES, problems)
    dest = "%s/%s%s" % (directory, name, suffix)
    if state == "present" and entry.get("content") is None:
        problems.append("%s.content: the file's text" % where)
        return None
    return _file(where, entry, dest, "file" if state == "present" else "absent", problems, image_paths, var="name",
                 kind=kind)


def _packages(where_list: Iterable[Entry], problems: List[str]) -> list[str]:
    found: list[str] = []
    for where, name in where_list:
        if not isinstance(name, str) or not _PACKAGE.fullmatch(name):
            problems.append("%s: %r is not a Debian package name (name, name=version or name:arch)" % (where, name))
            continue
        owned = paths.owned_package(name)
        if owned:
            problems.append("%s: %s is the product's (%s: each pod binds its own Slurm and munge over the jail's, "
                            "and the images pin them); refused (nothing was changed)" % (where, name, owned))
            continue
        found.append(name)
    return found


def _account(where: str, entry: Mapping[str, Any], kind: str, problems: List[str],
             image_paths: Sequence[str]) -> Item | None:
    name = entry.get("name")
    if not isinstance(name, str) or not _ACCOUNT.fullmatch(name):
        problems.append("%s.name: %r is not a %s name" % (where, name, kind))
        return None
    if name in (accounts.USERS if kind == "user" else accounts.GROUPS):
        problems.append("%s.name: %s is an account of the images (slurm/accounts.py): the product's; refused "
                        "(nothing was changed)" % (where, name))
        return None
    state = _state(where, entry, STATES, problems)
    item = dict(entry, name=name, state=state, var=where)
    key = "uid" if kind == "user" else "gid"
    if entry.get(key) is not None:
        number = entry[key]
        if not isinstance(number, int) or isinstance(number, bool) or number < 0:
            problems.append("%s.%s: %r is not an id" % (where, key, number))
            return None
        whose = accounts.system_id(number)
        if whose:
            problems.append("%s.%s: %d is %s, the images' (slurm/accounts.py); refused (nothing was changed)"
                            % (where, key, number, whose))
            return None
    if kind == "user":
        home = entry.get("home") or "/home/" + name
        # a user removed with their home (remove) removes that directory
        problem = _path_problem(where + ".home", home, image_paths, replacing=state == "absent" and
                                bool(entry.get("remove")))
        if problem:
            problems.append(problem)
            return None
        keys = entry.get("ssh_keys") or []
        if not isinstance(keys, list) or not all(isinstance(k, str) and "\n" not in k.strip() for k in keys):
            problems.append("%s.ssh_keys: a list of public keys, one line each" % where)
            return None
        item.update(home=home, ssh_keys=[k.strip() for k in keys], shell=entry.get("shell") or "/bin/bash")
    return item


def plan(request: Request, image_paths: Iterable[str] = (), modulefiles_dir: str = MODULEFILES_DIR) -> dict[str, Any]:
    """``{"problems": [...], "packages", "packages_absent", "files", "venvs", "users", "groups"}`` for the role's
    variables in ``request`` (their names without ``jail_software_``). ``image_paths``: the Slurm client paths of the
    jail's own paths.JAIL_SLURM_PATHS_FILE. Files (apt sources, profile snippets, modulefiles and ``files``) come
    with the path each writes; environments add Debian's python3-venv to the packages."""
    problems: list[str] = []
    image_paths = list(image_paths)
    result: dict[str, Any] = {"problems": problems, "files": [], "venvs": [], "users": [], "groups": []}
    result["packages"] = _packages(_entries(request, "packages", problems), problems)
    result["packages_absent"] = _packages(_entries(request, "packages_absent", problems), problems)
    directory_problem = _path_problem("jail_software_modulefiles_dir", modulefiles_dir, image_paths)
    if directory_problem:
        problems.append(directory_problem)
    for key, directory, suffix, kind in (("apt_sources", APT_SOURCES_DIR, ".list", "apt"),
                                         ("profile_snippets", PROFILE_DIR, ".sh", "profile_snippet"),
                                         ("modulefiles", modulefiles_dir, "", "modulefile")):
        for where, entry in _entries(request, key, problems):
            item = _named_file(where, entry, directory, suffix, problems, image_paths, kind, kind == "modulefile")
            if item:
                result["files"].append(item)
    for where, entry in _entries(request, "files", problems):
        state = _state(where, entry, FILE_STATES, problems)
        # apt's own configuration (its sources among it) is written before packages install
        dest = entry.get("dest")
        apt = isinstance(dest, str) and paths.normalised(dest) and paths.under(dest, APT_DIR)
        item = _file(where, entry, dest, state, problems, image_paths, kind="apt" if apt else "file")
        if item:
            result["files"].append(item)
    for where, entry in _entries(request, "venvs", problems):
        path = entry.get("path")
        state = _state(where, entry, STATES, problems)
        problem = _path_problem(where + ".path", path, image_paths, replacing=True)
        if problem:
            problems.append(problem)
            continue
        requirements = entry.get("requirements")
        result["venvs"].append({"path": path, "state": state, "packages": list(entry.get("packages") or []),
                                "requirements": requirements,
                                "requirements_dest": "%s/%s" % (path, REQUIREMENTS_FILE) if requirements else None,
                                "python": entry.get("python") or "python3", "var": where})
    if any(v["state"] == "present" for v in result["venvs"]):
        result["packages"] += [p for p in VENV_PACKAGES if p not in result["packages"]]
    for where, entry in _entries(request, "groups", problems):
        item = _account(where, entry, "group", problems, image_paths)
        if item:
            result["groups"].append(item)
    for where, entry in _entries(request, "users", problems):
        item = _account(where, entry, "user", problems, image_paths)
        if item:
            result["users"].append(item)
    return result


def package_name(package: str) -> str:
    """``hello`` of ``hello``, ``hello=2.10-5``, ``hello:amd64``."""
    return package.split("=", 1)[0].split(":", 1)[0]


def missing_packages(packages: Iterable[str], dpkg_output: str | None) -> list[str]:
    """Those of ``packages`` (``name`` or ``name=version``) that dpkg (its output in DPKG_QUERY_FORMAT) does not have
    installed, or at another version than the one pinned."""
    installed: dict[str, str] = {}
    for line in (dpkg_output or "").splitlines():
        fields = line.split("\t")
        if len(fields) == 3 and fields[1].strip() == "ii":
            installed[fields[0]] = fields[2]
    missing: list[str] = []
    for package in packages:
        version = package.split("=", 1)[1] if "=" in package else None
        have = installed.get(package_name(package))
        if have is None or (version is not None and have != version):
            missing.append(package)
    return missing
