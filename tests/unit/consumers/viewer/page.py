"""Reading the viewer's HTML in tests: table rows and cells by their data attributes."""

from __future__ import annotations

import html
import re
from typing import Any

from rllm.consumers.viewer.app import _fmt

__all__ = ["cell", "cells", "reward_rows", "rows", "table", "text"]


def text(fragment: str) -> str:
    """Visible text: tags removed, entities decoded, whitespace folded."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def rows(page: str, attr: str) -> dict[str, str]:
    """Each ``<tr data-ATTR="key">`` row's HTML by its key, in page order."""
    found = re.findall(rf'<tr data-{attr}="([^"]*)">(.*?)</tr>', page, flags=re.S)
    return {html.unescape(k): v for k, v in found}


def cells(fragment: str) -> dict[str, str]:
    """Every ``data-col`` cell's text in ``fragment`` by column."""
    found = re.findall(r'<td[^>]*data-col="([^"]+)"[^>]*>(.*?)</td>', fragment, flags=re.S)
    return {k: text(v) for k, v in found}


def cell(page: str, key: str) -> str:
    """The text of the summary item ``<dd data-k="key">``."""
    match = re.search(rf'<dd data-k="{key}">(.*?)</dd>', page, flags=re.S)
    assert match, f"no summary item {key!r}"
    return text(match.group(1))


def table(page: str, table_id: str) -> list[dict[str, str]]:
    """The rows of ``<table id=...>`` as dicts of their ``data-col`` cells."""
    match = re.search(rf'<table id="{table_id}"[^>]*>(.*?)</table>', page, flags=re.S)
    assert match, f"no table {table_id!r}"
    body = match.group(1).split("<tbody>", 1)[-1]
    return [cells(r) for r in re.findall(r"<tr>(.*?)</tr>", body, flags=re.S)]


def reward_rows(rewards: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The rewards table as the viewer shows ``run_named(..., "rewards")``'s records: one
    row a policy version, each figure formatted as the page formats it."""
    return [
        {
            "policy_version": str(r["policy_version"]),
            "sessions": str(r["sessions"]),
            "mean_reward": _fmt(r["mean_reward"]),
            "accuracy": _fmt(r["accuracy"]),
        }
        for r in rewards
    ]
