"""Reading the files of deploy/ the way their tools do, for tests that check them.

No container engine or cluster runs here, so the files are parsed: YAML with PyYAML, the
systemd unit with configparser, the Dockerfile with the few rules of its syntax that
these checks need (comments, line continuations, exec-form JSON arrays, stages).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.support.wheel import CHECKOUT

DEPLOY = CHECKOUT / "deploy"
README = CHECKOUT / "README.md"

# A setting of the README's configuration table: a row that starts with `ARVIS_...`.
_README_SETTING = re.compile(r"^\| `(ARVIS_[A-Z0-9_]+)` \|", re.MULTILINE)
ARVIS_VARIABLE = re.compile(r"\bARVIS_[A-Z0-9_]+\b")


def documented_settings() -> set[str]:
    """The ``ARVIS_*`` variables the README's configuration table documents."""
    return set(_README_SETTING.findall(README.read_text(encoding="utf-8")))


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


@dataclass
class Instruction:
    keyword: str
    arguments: str

    def exec_form(self) -> list[str]:
        """The JSON-array form (``["arvis", "serve"]``) of the arguments."""
        value = json.loads(self.arguments)
        assert isinstance(value, list), self
        assert all(isinstance(part, str) for part in value), self
        return value


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def last(self, keyword: str) -> Instruction:
        found = self.all(keyword)
        assert found, f"no {keyword} in the stage FROM {self.base}"
        return found[-1]

    def env(self) -> dict[str, str]:
        """``ENV`` of this stage, in ``key=value`` form."""
        values: dict[str, str] = {}
        for instruction in self.all("ENV"):
            for pair in instruction.arguments.split():
                key, _, value = pair.partition("=")
                values[key] = value
        return values


def dockerfile_stages(path: Path) -> list[Stage]:
    """The build stages of a Dockerfile, each with its instructions."""
    logical: list[str] = []
    pending = ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    assert not pending, "the Dockerfile ends inside a continued line"
    stages: list[Stage] = []
    for line in logical:
        keyword, _, arguments = line.partition(" ")
        keyword, arguments = keyword.upper(), " ".join(arguments.split())
        if keyword == "FROM":
            parts = arguments.split()
            name = parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else None
            stages.append(Stage(base=parts[0], name=name))
        elif keyword != "ARG" or stages:
            assert stages, f"{keyword} before the first FROM"
            stages[-1].instructions.append(Instruction(keyword, arguments))
    return stages


def with_port(argv: list[str], port: int, default: int = 8000) -> list[str]:
    """``argv`` with the image's port replaced by ``port`` (this machine's 8000 may be taken)."""
    return [
        part.replace(f":{default}/", f":{port}/") if part != str(default) else str(port)
        for part in argv
    ]
