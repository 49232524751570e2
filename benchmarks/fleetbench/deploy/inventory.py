"""Check an inventory, a --limit and --tags as Ansible reads them, before a playbook runs anything.

ansible-playbook takes an inventory it cannot parse with a warning ("Unable to parse ... as an
inventory source") and goes on with the implicit localhost alone; an empty inventory, or one whose
hosts are in none of the playbook's groups, gives plays that match no host and "succeed"; --tags
naming a tag no task has runs nothing and succeeds too. So before the runner starts, two read-only
commands of the same ansible, with the same ansible.cfg:

1. `ansible-inventory -i INVENTORY --list` parses the inventory as the playbook will (group_vars and
   host_vars included). A source Ansible could not parse is refused with the inventory plugin's own
   message (the `yaml` plugin's for a .yml/.yaml/.json file, `ini`'s otherwise), as is an inventory
   without hosts and a host whose ansible_port is not a port.
2. `ansible-playbook --list-hosts --list-tags PLAYBOOK [--limit L]` lists each play's hosts and tags
   and runs nothing. A --limit part that matches no host or group, a playbook whose plays match no
   host, and --tags / --skip-tags naming a tag the playbook (or, for --skip-tags, deploy/) does not
   have are refused.

The parsing of what those commands print is kept apart from running them (`parse_listing`,
`check_inventory`, `parse_plays`, `check_targets`, `check_tags`), so tests feed it any text.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fleetbench.errors import UserError
from fleetbench.fsutil import readable_file

TIMEOUT_S = 120
SPECIAL_TAGS = frozenset({"all", "always", "never", "tagged", "untagged"})
IMPLICIT_GROUPS = frozenset({"all", "ungrouped"})
ACCEPTED = "accepted: a YAML or INI inventory file, or a folder of them (see deploy/inventories/example)"
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
FAILED_PLUGIN = re.compile(
    r"^\[WARNING\]:\s+(?:\*\s+)?Failed to parse (?:inventory|(?P<source>.+?)) with '?(?P<plugin>[\w.]+)'? plugin:?"
    r"\s*(?P<message>.*)$"
)
UNPARSED = re.compile(r"^\[WARNING\]:\s+Unable to parse (?P<source>.+) as an inventory source\s*$")
ORIGIN = re.compile(r"^Origin: (?P<source>.+?):(?P<line>\d+)(?::\d+)?\s*$")
NO_MATCH = re.compile(r"^\[WARNING\]:\s+Could not match supplied host pattern, ignoring: (?P<pattern>.+?)\s*$")
ERROR = re.compile(r"^(?:\[ERROR\]|ERROR!):?\s*(?P<message>.+)$")
PLAY = re.compile(r"^\s*play #\d+ \((?P<pattern>.*?)\): (?P<name>.*?)\tTAGS: \[(?P<tags>.*)\]\s*$")
HOSTS = re.compile(r"^\s*hosts \((?P<count>\d+)\):")
TASK_TAGS = re.compile(r"^\s*TASK TAGS: \[(?P<tags>.*)\]\s*$")
CLASS_REPR = re.compile(r"<class '(?:[\w]+\.)*_?(?:AnsibleTagged)?(?P<name>\w+)'>")
LIMIT_PARTS = re.compile(r",|:(?![^\[]*\])")  # ansible's split: on commas, else on colons outside [ranges]
YAML_SUFFIXES = (".yml", ".yaml")
MAX_YAML_BYTES = 1 << 24


class _AnyTagLoader(yaml.SafeLoader):
    """A safe loader that reads any tag (Ansible's `!vault`, `!unsafe`) as no value."""


_AnyTagLoader.add_multi_constructor("", lambda loader, suffix, node: None)


@dataclass(frozen=True)
class Inventory:
    """An inventory as Ansible read it: each host with its variables, and each group's own hosts."""

    label: str  # the inventory as the user named it
    hosts: dict[str, dict[str, Any]]
    groups: dict[str, list[str]]

    def describe(self, limit: int = 12) -> str:
        """`hosts: a, b; groups: g1, g2` (at most `limit` of each), for messages."""
        groups = sorted(set(self.groups) - IMPLICIT_GROUPS)
        return f"hosts: {_some(sorted(self.hosts), limit)}; groups: {_some(groups, limit) if groups else 'none'}"


@dataclass(frozen=True)
class Play:
    """One play as `ansible-playbook --list-hosts --list-tags` lists it."""

    pattern: str
    name: str
    hosts: int = 0
    tags: frozenset[str] = field(default_factory=frozenset)


@dataclass
class _Unparsed:
    """A source Ansible could not parse, with each inventory plugin's message and the line it named."""

    source: str
    messages: dict[str, str]
    line: str | None


def _some(names: Sequence[str], limit: int) -> str:
    shown = ", ".join(names[:limit])
    return f"{shown} ... ({len(names) - limit} more)" if len(names) > limit else shown


def plain(text: str) -> str:
    """`text` without ANSI escape sequences (Ansible colours its output on a terminal)."""
    return ANSI.sub("", text)


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(CLASS_REPR.sub(lambda m: m.group("name").lower(), plain(text)).split()).rstrip(". ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def precheck(path: Path, label: str) -> None:
    """Refuse what Ansible should not even be shown: a missing path, a folder without a hosts file,
    a file that is not a regular readable one (a FIFO would block it), an empty file."""
    if not path.exists():
        raise UserError(
            f"inventory {label} does not exist; pass a folder with hosts.yml (e.g. deploy/inventories/example)"
        )
    if path.is_dir():
        if not any(path.glob("hosts*")) and not any(path.glob("*.ini")):
            raise UserError(f"inventory {label} holds no hosts file (hosts.yml or *.ini)")
        return
    readable_file(path, "inventory", ACCEPTED)
    try:
        with path.open("rb") as handle:
            head = handle.read(1 << 16)
    except OSError as exc:
        raise UserError(f"inventory {label} cannot be read ({exc.strerror}); {ACCEPTED}") from None
    if not head.strip():
        raise UserError(f"inventory {label} is empty: it names no hosts; {ACCEPTED}")
    not_mapping = _yaml_not_a_mapping(path)
    if not_mapping:
        raise UserError(
            f"inventory {label} is YAML holding {not_mapping}, not a mapping of groups (all: hosts: ...); "
            f"Ansible would read it as an INI host list; {ACCEPTED}"
        )


def _yaml_not_a_mapping(path: Path) -> str | None:
    """What a .yml/.yaml file holds when it is YAML but not a mapping (a bare word: Ansible's yaml plugin
    refuses it, and its ini plugin then takes the words for host names); None otherwise."""
    if not path.name.endswith(YAML_SUFFIXES) or path.stat().st_size > MAX_YAML_BYTES:
        return None
    try:
        text = path.read_text(encoding="utf-8")
        if text.startswith("$ANSIBLE_VAULT"):
            return None  # encrypted: Ansible decrypts it first
        data = yaml.load(text, Loader=_AnyTagLoader)  # a SafeLoader that reads any tag as None
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError):
        return None  # Ansible's own parse says what is wrong
    if data is None or isinstance(data, dict | list):
        return None  # a mapping, an empty document, or a list (which Ansible refuses itself)
    shown = str(data)
    return f"the text {shown if len(shown) <= 40 else shown[:37] + '...'!r}"


def _unparsed_sources(stderr: str) -> list[_Unparsed]:
    """The sources ansible-inventory warned it could not parse, in order, each with its plugins' messages."""
    found: list[_Unparsed] = []
    pending: dict[str, str] = {}
    line: str | None = None
    for raw in plain(stderr).splitlines():
        text = raw.strip()
        failed = FAILED_PLUGIN.match(text)
        if failed:
            pending.setdefault(failed.group("plugin"), failed.group("message"))
            continue
        origin = ORIGIN.match(text)
        if origin and line is None:
            line = origin.group("line")
            continue
        unparsed = UNPARSED.match(text)
        if unparsed:
            found.append(_Unparsed(unparsed.group("source"), pending, line))
            pending, line = {}, None
    return found


def _plugin_order(source: str, messages: dict[str, str]) -> tuple[str, ...]:
    """Whose message says most about a source: the plugin its file name says it is meant for."""
    suffix = Path(source).suffix.lower()
    if suffix in {".yml", ".yaml", ".json"}:
        if messages.get("yaml", "").startswith("Plugin configuration"):
            return ("auto", "yaml", "ini")  # a `plugin:` config: the auto plugin tried to load it
        return ("yaml", "auto", "ini")
    if suffix == ".toml":
        return ("toml", "ini", "yaml")
    return ("ini", "yaml", "toml", "auto")


def parse_failure(root: Path, stderr: str) -> str | None:
    """The one-line complaint about an inventory ansible-inventory could not (wholly) parse, else None."""
    sources = _unparsed_sources(stderr)
    if not sources:
        return "Ansible found no inventory in it" if "No inventory was parsed" in stderr else None
    source = next((s for s in sources if s.messages), sources[0])
    plugin = next((p for p in _plugin_order(source.source, source.messages) if p in source.messages), None)
    if plugin is None:
        plugin = next(iter(source.messages), None)
    message = source.messages[plugin] if plugin else f"Unable to parse {source.source} as an inventory source"
    where = ""
    if Path(source.source) != root:
        try:
            where = f"its file {Path(source.source).relative_to(root)}"
        except ValueError:
            where = f"file {source.source}"
    if source.line:
        where = f"{where} line {source.line}".strip()
    said = f"Ansible's {plugin} plugin: {_one_line(message)}" if plugin else _one_line(message)
    return f"{said} ({where})" if where else said


def _last_error(stderr: str) -> str:
    """The last `[ERROR]` line of an ansible command's output, else its last line."""
    lines = [line.strip() for line in plain(stderr).splitlines() if line.strip()]
    errors = [m.group("message") for m in map(ERROR.match, lines) if m]
    return _one_line((errors or lines or ["no output"])[-1])


def parse_listing(label: str, root: Path, done: subprocess.CompletedProcess[str]) -> Inventory:
    """The inventory `ansible-inventory --list` printed for `root`; UserError when Ansible could not read
    all of it (its own message, one line) or printed no listing."""
    if done.returncode != 0:
        failure = parse_failure(root, done.stderr) or _last_error(done.stderr)
        raise UserError(f"inventory {label} cannot be read by Ansible: {failure}; {ACCEPTED}")
    problem = parse_failure(root, done.stderr)
    if problem is not None:
        raise UserError(f"inventory {label} is not a valid Ansible inventory: {problem}; {ACCEPTED}")
    try:
        listing = json.loads(done.stdout)
    except (ValueError, RecursionError):
        listing = None
    if not isinstance(listing, dict):
        raise UserError(f"inventory {label}: ansible-inventory printed no listing ({_last_error(done.stderr)})")
    meta = listing.get("_meta")
    hostvars = meta.get("hostvars") if isinstance(meta, dict) else None
    hosts = {str(h): v if isinstance(v, dict) else {} for h, v in (hostvars or {}).items()}
    groups: dict[str, list[str]] = {}
    for name, group in listing.items():
        members = group.get("hosts") if isinstance(group, dict) else None
        if name != "_meta" and isinstance(group, dict):
            groups[str(name)] = [str(h) for h in members] if isinstance(members, list) else []
    for members in groups.values():
        for host in members:
            hosts.setdefault(host, {})
    return Inventory(label, hosts, groups)


def _port_ok(value: Any) -> bool:
    if isinstance(value, str) and "{{" in value:
        return True  # a template: Ansible settles it per host when it connects
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        value = int(value)
    return type(value) is int and 1 <= value <= 65535


def check_inventory(inventory: Inventory) -> None:
    """Refuse an inventory without hosts, and a host whose ansible_port is not a port number."""
    if not inventory.hosts:
        raise UserError(
            f"inventory {inventory.label} holds no hosts (Ansible read it, and found no host in it); {ACCEPTED}"
        )
    for host, variables in sorted(inventory.hosts.items()):
        for key in ("ansible_port", "ansible_ssh_port"):
            if key in variables and not _port_ok(variables[key]):
                raise UserError(
                    f"inventory {inventory.label}: host {host} has {key} {variables[key]!r}; "
                    "accepted: a port number in 1-65535"
                )


def parse_plays(stdout: str) -> list[Play]:
    """The plays `ansible-playbook --list-hosts --list-tags` printed: pattern, name, host count and tags."""
    plays: list[Play] = []
    for line in plain(stdout).splitlines():
        play = PLAY.match(line)
        if play:
            plays.append(Play(play.group("pattern"), play.group("name"), tags=_tags(play.group("tags"))))
            continue
        if not plays:
            continue
        hosts, tags = HOSTS.match(line), TASK_TAGS.match(line)
        last = plays[-1]
        if hosts:
            plays[-1] = Play(last.pattern, last.name, int(hosts.group("count")), last.tags)
        elif tags:
            plays[-1] = Play(last.pattern, last.name, last.hosts, last.tags | _tags(tags.group("tags")))
    return plays


def _tags(text: str) -> frozenset[str]:
    return frozenset(t.strip() for t in text.split(",") if t.strip())


def limit_parts(limit: str) -> list[str]:
    """The host patterns of a --limit, without their `!` / `&` operators."""
    return [part.strip().lstrip("!&") for part in LIMIT_PARTS.split(limit) if part.strip().lstrip("!&")]


def check_targets(
    inventory: Inventory, playbook: str, plays: list[Play], done: subprocess.CompletedProcess[str], limit: str | None
) -> None:
    """Refuse a --limit part that matches nothing and a playbook whose plays match no host."""
    unmatched = {m.group("pattern") for m in map(NO_MATCH.match, plain(done.stderr).splitlines()) if m}
    if limit is not None:
        missing = [part for part in limit_parts(limit) if part in unmatched]
        if missing and missing != [limit]:
            parts = ", ".join(repr(p) for p in missing)
            raise UserError(
                f"--limit {limit!r}: {parts} matches no host or group of inventory {inventory.label}; "
                f"{inventory.describe()}"
            )
        if missing or "no hosts to target" in done.stderr:
            raise UserError(f"--limit {limit!r} matches no host of inventory {inventory.label}; {inventory.describe()}")
    if done.returncode != 0:
        raise UserError(
            f"playbook {playbook} cannot be listed on inventory {inventory.label}: {_last_error(done.stderr)}"
        )
    if not any(play.hosts for play in plays):
        patterns = ", ".join(dict.fromkeys(play.pattern for play in plays)) or "none"
        limited = f" within --limit {limit!r}" if limit is not None else ""
        raise UserError(
            f"playbook {playbook} targets no host of inventory {inventory.label}{limited}: its plays run on "
            f"{patterns}; the inventory has {inventory.describe()}"
        )


def _tag_list(value: str, flag: str) -> list[str]:
    tags = [t.strip() for t in value.split(",") if t.strip()]
    if not tags:
        raise UserError(f"{flag} {value!r} names no tag; use TAG[,TAG...]")
    return tags


def check_flags(limit: str | None, tags: str | None, skip_tags: str | None) -> None:
    """What is wrong with --limit, --tags and --skip-tags on their own: an empty one, a tag in both."""
    if limit is not None and not limit_parts(limit):
        raise UserError(f"--limit {limit!r} names no host or group; use PATTERN[,PATTERN...] (ansible --limit)")
    wanted = _tag_list(tags, "--tags") if tags is not None else []
    skipped = _tag_list(skip_tags, "--skip-tags") if skip_tags is not None else []
    both = sorted(set(wanted) & set(skipped) - {"all"})
    if both:
        raise UserError(f"--tags and --skip-tags both name {', '.join(both)}: nothing of it would run; keep one")


def check_tags(playbook: str, plays: list[Play], tags: str | None, skip_tags: str | None, known: Iterable[str]) -> None:
    """Refuse --tags naming a tag no task of the playbook has (nothing of it would run), --skip-tags
    naming a tag nothing under deploy/ has (`known`: a typo would skip nothing), and a tag in both."""
    check_flags(None, tags, skip_tags)
    mine = frozenset().union(*(play.tags for play in plays)) if plays else frozenset()
    accepted = ", ".join(sorted(mine | SPECIAL_TAGS))
    wanted = _tag_list(tags, "--tags") if tags is not None else []
    skipped = _tag_list(skip_tags, "--skip-tags") if skip_tags is not None else []
    unknown = [t for t in wanted if t not in mine | SPECIAL_TAGS]
    if unknown:
        raise UserError(
            f"--tags {tags!r}: no task of playbook {playbook} is tagged {', '.join(unknown)}, so nothing of it "
            f"would run; accepted: {accepted}"
        )
    every = mine | SPECIAL_TAGS | frozenset(known)
    typos = [t for t in skipped if t not in every]
    if typos:
        raise UserError(
            f"--skip-tags {skip_tags!r}: no task under deploy/ is tagged {', '.join(typos)}, so it would skip "
            f"nothing; accepted for playbook {playbook}: {accepted}"
        )


def deploy_tags(root: Path) -> set[str]:
    """Every tag the playbooks and roles under `root` give a task, a block, a role or a play."""
    found: set[str] = set()
    for path in sorted(root.rglob("*.yml")):
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue  # a vaulted or templated file holds no tags we could read
        _collect_tags(data, found)
    return found


def _collect_tags(data: Any, found: set[str]) -> None:
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            tags = item.get("tags")
            if isinstance(tags, str):
                found.update(t.strip() for t in tags.split(","))
            elif isinstance(tags, list):
                found.update(str(t) for t in tags)
            stack.extend(v for k, v in item.items() if k != "tags")


def run_ansible(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a read-only ansible command to its end; UserError when it cannot start or hangs."""
    try:
        return subprocess.run(
            argv,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=TIMEOUT_S,
            env={**os.environ, **env},
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise UserError(
            f"{Path(argv[0]).name} did not finish within {TIMEOUT_S} s; is the inventory reachable?"
        ) from None
    except OSError as exc:
        raise UserError(f"{argv[0]} cannot run ({exc.strerror}); `make setup` installs ansible into .venv") from None
