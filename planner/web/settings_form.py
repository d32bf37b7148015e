"""The per-project settings of ``/projects/{key}/settings/``: what each one is called in words, how
the page's form sends it, and what it is now (the project's own value or the default).

Every setting of ``ballet.env.PROJECT_SETTINGS`` is here, and only those: the page validates them
with ``project_settings_clean``, so a bad value gets exactly the configuration file's message
("max_rounds: must be positive, got -1"), and saves them with ``project_update``, as REST does.
The default is the deployment's (``ballet.toml``, then the environment); an empty field, the
"Default" choice or the "Use the default" option removes the project's own value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from django.conf import settings as django_settings
from django.http import QueryDict

from ballet.env import DIRECT_EDITS, PROJECT_SETTINGS, PROVIDERS
from planner.domain.tools import TOOLS
from tracker.errors import ValidationError
from tracker.inputs import NUL_MESSAGE
from tracker.services.projects import project_settings_clean

Control = Literal["text", "integer", "decimal", "boolean", "choice", "tools", "labels"]
MAX_VALUE = 200  # characters of one text or number field
MAX_LIST = 2000  # characters of a comma-separated list


@dataclass(frozen=True)
class SettingSpec:
    name: str
    label: str
    help: str
    control: Control
    group: str
    choices: tuple[str, ...] = ()
    unset: str = "none"  # how a default of None reads


SPECS: tuple[SettingSpec, ...] = (
    SettingSpec(
        name="provider",
        label="Planner",
        help="Who answers the project's chats: Claude, or the scripted demo planner that needs no key.",
        control="choice",
        group="Planner",
        choices=PROVIDERS,
        unset="automatic: Claude with a credential, the demo planner without one",
    ),
    SettingSpec(
        name="model",
        label="Model",
        help="The Claude model id that answers the chats.",
        control="text",
        group="Planner",
    ),
    SettingSpec(
        name="title_model",
        label="Model for chat titles",
        help="The model that names a new chat.",
        control="text",
        group="Planner",
    ),
    SettingSpec(
        name="compaction_model",
        label="Model for compaction",
        help="The model that summarizes a long chat.",
        control="text",
        group="Planner",
        unset="the chat's model",
    ),
    SettingSpec(
        name="compact_at_tokens",
        label="Compact the context at (tokens)",
        help="A chat whose context reaches this many tokens is summarized.",
        control="integer",
        group="Planner",
    ),
    SettingSpec(
        name="max_rounds",
        label="Rounds per turn at most",
        help="How many rounds of tool calls one answer may take.",
        control="integer",
        group="Planner",
    ),
    SettingSpec(
        name="max_subchats",
        label="Sub-chats at once at most",
        help="How many sub-chats the planner of one chat runs at once (start_subchat).",
        control="integer",
        group="Planner",
    ),
    SettingSpec(
        name="max_output_tokens",
        label="Output tokens per round at most",
        help="How much the model may write in one round.",
        control="integer",
        group="Planner",
    ),
    SettingSpec(
        name="daily_token_budget",
        label="Daily token budget",
        help="Every token processed for this project per UTC day, cached ones too; "
        "past it, chats wait for the next day.",
        control="integer",
        group="Planner",
        unset="no budget",
    ),
    SettingSpec(
        name="four_eyes",
        label="Four eyes",
        help="When on, whoever proposed a changeset may not apply it themself.",
        control="boolean",
        group="Planner",
    ),
    SettingSpec(
        name="skill",
        label="Skill",
        help="The name of the skill the planner follows in this project.",
        control="text",
        group="Planner",
    ),
    SettingSpec(
        name="approve_tools",
        label="Tools that wait for approval",
        help="A call of these tools waits until a person approves it.",
        control="tools",
        group="Planner",
    ),
    SettingSpec(
        name="claim_minutes",
        label="Claim lease (minutes)",
        help="How long a claim on a ticket holds without news from its holder.",
        control="integer",
        group="Work",
    ),
    SettingSpec(
        name="reuse_threshold",
        label="Answer reuse threshold",
        help="How alike (0 to 1) a question must be to an answered one to get its answer back.",
        control="decimal",
        group="Work",
    ),
    SettingSpec(
        name="reuse_judge_floor",
        label="Answer reuse judge floor",
        help="Answered questions at least this alike (0 to 1), below the threshold, are shown to the "
        "project's title model, which says whether one asks the same (1: never).",
        control="decimal",
        group="Work",
    ),
    SettingSpec(
        name="direct_edits",
        label="Direct edits",
        help="Edits on a ticket's page: applied at once (all), only state moves and comments at once "
        "(state), or every edit proposed for review (none).",
        control="choice",
        group="Tracker",
        choices=DIRECT_EDITS,
    ),
    SettingSpec(
        name="labels",
        label="Labels",
        help="The labels a ticket may carry, separated by commas (lowercase, up to 30 characters each).",
        control="labels",
        group="Tracker",
    ),
)
GROUPS = ("Planner", "Work", "Tracker")
assert {spec.name for spec in SPECS} == set(PROJECT_SETTINGS), "every project setting has its field"


@dataclass
class SettingRow:
    """One setting as the page shows it: its effective value, whose it is, and the form's input."""

    spec: SettingSpec
    default: str  # the default, in words
    effective: str
    own: bool  # the project sets its own value
    value: str = ""  # what the text field holds, or the select's choice ("": the default)
    use_default: bool = True  # for lists: the "Use the default" option is chosen
    chosen: list[str] = field(default_factory=list)  # approve_tools ticked
    errors: list[str] = field(default_factory=list)

    @property
    def tool_names(self) -> list[str]:
        """The planner's tools, and any name the project set that is not one (kept unless unticked)."""
        return [*TOOLS, *(name for name in self.chosen if name not in TOOLS)]


def _defaults() -> dict[str, Any]:
    planner, work = django_settings.BALLET_PLANNER, django_settings.BALLET_WORK
    return {spec.name: getattr(planner if hasattr(planner, spec.name) else work, spec.name) for spec in SPECS}


def in_words(spec: SettingSpec, value: Any) -> str:
    if value is None:
        return spec.unset
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, list | tuple):
        return ", ".join(str(part) for part in value) or "none"
    return str(value)


def _as_input(spec: SettingSpec, value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, list | tuple):
        return ", ".join(str(part) for part in value)
    return "" if value is None else str(value)


def setting_rows(overrides: Mapping[str, Any]) -> list[SettingRow]:
    """The rows of a project whose own values are ``overrides`` (its ``settings``)."""
    defaults = _defaults()
    rows = []
    for spec in SPECS:
        own = spec.name in overrides and overrides[spec.name] is not None
        value = overrides[spec.name] if own else defaults[spec.name]
        rows.append(
            SettingRow(
                spec=spec,
                default=in_words(spec, defaults[spec.name]),
                effective=in_words(spec, value),
                own=own,
                value=_as_input(spec, value) if own or spec.control in ("labels",) else "",
                use_default=not own,
                chosen=[str(name) for name in value] if spec.control == "tools" else [],
            )
        )
    return rows


def _nul_or_long(text: str, limit: int) -> str | None:
    if "\x00" in text:
        return NUL_MESSAGE
    if len(text) > limit:
        return f"At most {limit} characters."
    return None


def _read_row(row: SettingRow, post: QueryDict) -> tuple[bool, Any]:
    """Fill ``row`` with what the form sent for it; (whether it sets the project's own value, the
    value to validate). Errors the configuration's fields do not know of (NUL, length) go on the row."""
    name, control = row.spec.name, row.spec.control
    problems: list[str | None]
    raw: Any
    if control == "tools":
        row.chosen = [str(tool) for tool in post.getlist(name)]
        raw, problems = row.chosen, [_nul_or_long(tool, MAX_VALUE) for tool in row.chosen]
    elif control == "labels":
        row.value = post.get(name, "")
        raw = [part.strip() for part in row.value.split(",") if part.strip()]
        problems = [_nul_or_long(row.value, MAX_LIST)]
    else:
        row.value = raw = post.get(name, "").strip()
        problems = [_nul_or_long(row.value, MAX_VALUE)]
    if control in ("tools", "labels"):
        row.use_default = post.get(f"{name}__source", "default") != "own"
        if row.use_default:
            return False, None
    elif not raw:
        return False, None
    elif control == "boolean":
        problems.append(None if raw in ("on", "off") else "Choose on, off or the default.")
        raw = raw == "on"
    row.errors = [problem for problem in problems if problem]
    return not row.errors, raw


def submitted_settings(
    post: QueryDict, current: Mapping[str, Any]
) -> tuple[dict[str, Any], list[SettingRow]]:
    """The overrides the form sends, validated as the configuration file's values are, and the
    rows to show again (with what was typed and each field's errors). Any error:
    :class:`SettingsInvalidError`, nothing to save."""
    overrides: dict[str, Any] = {}
    rows = setting_rows(current)
    for row in rows:
        own, raw = _read_row(row, post)
        if own:
            overrides[row.spec.name] = raw
    try:
        cleaned = project_settings_clean(overrides)
    except ValidationError as exc:
        by_name = {row.spec.name: row for row in rows}
        for where, messages in exc.errors.items():
            by_name[where.removeprefix("settings.")].errors.extend(messages)
        cleaned = {}
    if any(row.errors for row in rows):
        raise SettingsInvalidError(rows)
    return cleaned, rows


class SettingsInvalidError(Exception):
    """Some setting the form sent is bad: the rows say which, and why."""

    def __init__(self, rows: list[SettingRow]) -> None:
        super().__init__("settings invalid")
        self.rows = rows


def grouped(rows: list[SettingRow]) -> list[tuple[str, list[SettingRow]]]:
    return [(group, [row for row in rows if row.spec.group == group]) for group in GROUPS]
