"""Readable previews of a tool call's input, for the human who approves it (SPEC § 13.3)."""

from __future__ import annotations

import json
from typing import Any

from tracker.models import Project


def request_preview(*, tool: str, input: dict[str, Any], project: Project) -> list[dict[str, Any]]:
    """Rows ``{"label", "value"}`` describing ``input``; never raises on what the model wrote."""
    if not isinstance(input, dict):
        return []
    return [
        {
            "label": str(key),
            "value": value if isinstance(value, str) else json.dumps(value, ensure_ascii=False),
        }
        for key, value in input.items()
    ]
