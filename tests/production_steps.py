"""The README's production setup as data: the variables its block exports and the commands it runs,
read from README.md itself, so that the tests that follow it (tests/e2e/test_production_setup.py)
and check compose.yaml against it (tests/test_compose.py) change when it does."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Command:
    env: dict[str, str]  # NAME=VALUE words before the program
    argv: list[str]

    @property
    def program(self) -> str:
        return Path(self.argv[0]).name


@dataclass(frozen=True)
class ProductionSteps:
    exported: dict[str, str]
    commands: list[Command]

    def named(self, program: str, *words: str) -> Command:
        """The one command of ``program`` whose words include ``words``."""
        found = [c for c in self.commands if c.program == program and all(w in c.argv for w in words)]
        assert len(found) == 1, (program, words, self.commands)
        return found[0]


def production_steps() -> ProductionSteps:
    """The first ``sh`` block of the README's "Production" section, line by line."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Production\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block, "no sh block in the README's Production section"
    exported: dict[str, str] = {}
    commands: list[Command] = []
    for line in block.group(1).replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        if words[0] == "export":
            name, value = words[1].split("=", 1)
            exported[name] = value
            continue
        env: dict[str, str] = {}
        while "=" in words[0] and not words[0].startswith(("-", ".", "/")):
            name, value = words.pop(0).split("=", 1)
            env[name] = value
        commands.append(Command(env=env, argv=words))
    return ProductionSteps(exported=exported, commands=commands)
