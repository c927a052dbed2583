"""Harbor's reward files: ``/logs/verifier/reward.json`` (a flat object of finite
numbers; it wins) or ``reward.txt`` (one finite number), read strictly.

The main reward is ``reward.json``'s ``reward`` key; without one, ``reward.txt``'s number
when that file exists too (as Harbor does); else the only value when there is just one
(Harbor's mean metric takes exactly one); several values and no ``reward`` is an error.
Harbor drops non-numeric values of ``reward.json``; we refuse them, so that a broken
verifier is seen, never read as a silent 0.
"""

from __future__ import annotations

import json
import math

from rllm.benchmarks.errors import RewardFileError
from rllm.sandboxes.types import Sandbox

__all__ = [
    "REWARD_JSON",
    "REWARD_TXT",
    "VERIFIER_DIR",
    "parse_reward_json",
    "parse_reward_txt",
    "read_file",
    "read_rewards",
]

VERIFIER_DIR = "/logs/verifier"
"""Where test.sh writes its reward and Harbor keeps its output."""
REWARD_JSON = f"{VERIFIER_DIR}/reward.json"
REWARD_TXT = f"{VERIFIER_DIR}/reward.txt"


def _show(text: str) -> str:
    return repr(text if len(text) <= 200 else text[:200] + "...")


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def parse_reward_txt(text: str, path: str = REWARD_TXT) -> float:
    """The one finite number in ``reward.txt``.

    Raises:
        RewardFileError: empty, not a number, or nan/inf; naming ``path`` and the content.
    """
    if not text.strip():
        raise RewardFileError(f"{path} is empty; test.sh must write one number (1 or 0.5)")
    try:
        number = float(text.strip())
    except ValueError:
        raise RewardFileError(f"{path} is not a number: {_show(text)}") from None
    if not math.isfinite(number):
        raise RewardFileError(f"{path} holds {_show(text)}, not a finite number")
    return number


def parse_reward_json(text: str, path: str = REWARD_JSON) -> dict[str, float]:
    """The named values of ``reward.json``: a flat object of finite numbers.

    Raises:
        RewardFileError: empty, not JSON, not an object, no values, or a value that is not a
            finite number (nested, string, bool, nan); naming ``path`` and the content.
    """
    if not text.strip():
        raise RewardFileError(f"{path} is empty; test.sh must write a JSON object of numbers")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise RewardFileError(f"{path} is not valid JSON ({exc}): {_show(text)}") from None
    if not isinstance(data, dict):
        raise RewardFileError(f"{path} must be a JSON object of numbers, got {_show(text)}")
    if not data:
        raise RewardFileError(f"{path} is an empty object; it needs at least a 'reward' value")
    values: dict[str, float] = {}
    for key, value in data.items():
        number = _number(value)
        if number is None:
            kind = "nested" if isinstance(value, dict | list) else "not a finite number"
            raise RewardFileError(f"{path}: value of {key!r} is {kind}: {_show(json.dumps(value))}")
        values[key] = number
    return values


async def read_file(sandbox: Sandbox, path: str) -> str | None:
    """A file of the sandbox as text; None when it is not there."""
    try:
        return (await sandbox.read_file(path)).decode("utf-8", "replace")
    except FileNotFoundError:
        return None


async def read_rewards(sandbox: Sandbox, files: dict[str, str]) -> tuple[float, dict[str, float]]:
    """The main reward and the named values, by the rules in the module docstring; the
    files read go into ``files`` (cut at 1,000 characters).

    Raises:
        RewardFileError: no reward file, or a bad one; naming the path and the content.
    """
    json_text = await read_file(sandbox, REWARD_JSON)
    txt_text = await read_file(sandbox, REWARD_TXT)
    for path, text in ((REWARD_JSON, json_text), (REWARD_TXT, txt_text)):
        if text is not None:
            files[path] = text[:1000]
    if json_text is None:
        if txt_text is None:
            raise RewardFileError(
                f"test.sh wrote no reward: neither {REWARD_TXT} nor {REWARD_JSON} exists"
            )
        reward = parse_reward_txt(txt_text)
        return reward, {"reward": reward}
    values = parse_reward_json(json_text)
    if "reward" in values:
        return values["reward"], values
    if txt_text is not None:
        values["reward"] = parse_reward_txt(txt_text)
        return values["reward"], values
    if len(values) == 1:
        return next(iter(values.values())), values
    raise RewardFileError(
        f"{REWARD_JSON} has {len(values)} values ({', '.join(values)}) and no 'reward' key: "
        f"add one, or write only one value"
    )
