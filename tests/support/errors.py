"""The one-line rule for bad input, as the tests check it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


def one_line_error(kind: type[BaseException], call: Callable[[], Any]) -> str:
    """The message of the ``kind`` that ``call`` raises, checked to be one line."""
    with pytest.raises(kind) as info:
        call()
    message = str(info.value)
    assert "\n" not in message
    return message
