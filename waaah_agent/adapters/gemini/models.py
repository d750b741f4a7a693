"""gemini's models for `waaah run`: the bundled aliases and the smaller model after a capacity error.

Only models gemini-cli lists itself (its model constants). Its capacity errors are recognised
as gemini-cli itself does (429/503 with an ErrorInfo reason MODEL_CAPACITY_EXHAUSTED or
_EXCEEDED, or these words in the message); gemini-cli 0.61 ends such a run with exit code 173
and no HTTP status (an unknown error to the classifier).
"""

from __future__ import annotations

import re

#: The bundled aliases (``--model fast``).
ALIASES = {"fast": "gemini-2.5-flash", "smart": "gemini-2.5-pro", "pro": "gemini-2.5-pro"}

_CAPACITY = re.compile(
    r"(?i)no capacity available|exhausted your capacity|capacity exceeded|MODEL_CAPACITY_EXHAUSTED|"
    r"MODEL_CAPACITY_EXCEEDED"
)

#: The next smaller model of the same family.
SMALLER: dict[str, str] = {
    "gemini-3.1-pro-preview": "gemini-3-flash-preview",
    "gemini-3-pro-preview": "gemini-3-flash-preview",
    "gemini-3-flash-preview": "gemini-3.1-flash-lite",
    "gemini-2.5-pro": "gemini-2.5-flash",
    "gemini-2.5-flash": "gemini-2.5-flash-lite",
}


def is_capacity(text: str) -> bool:
    return bool(_CAPACITY.search(text))


def smaller_model(model: str, evidence: str) -> str | None:
    """The model to try once more after ``model`` failed with ``evidence`` (what gemini said):
    the next smaller one when it had no capacity, else None."""
    return SMALLER.get(model) if is_capacity(evidence) else None
