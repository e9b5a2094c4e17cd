"""One environment variable as the project reads it: a ``Setting``, declared once with ``define`` (its default, what
it means, its least value), read and checked through its methods, and listed in the configuration table.

``include/core/settings.py`` declares every setting of the project with it; these two modules are the only ones that
read the environment (``tests/unit/test_settings.py``). Nothing here does I/O at import.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from dataclasses import dataclass

from include.core.errors import ConfigurationError


@dataclass(frozen=True)
class Setting:
    """One environment variable: its name, its default (``None``: unset means "not used") and what it means."""

    name: str
    default: str | None
    description: str
    section: str
    minimum: float | None = None  # the least ``integer()`` and ``number()`` accept: below it is a SettingError

    def raw(self) -> str | None:
        """The value as set, stripped; ``None`` when unset or blank."""
        value = os.environ.get(self.name, "").strip()
        return value or None

    def get(self) -> str | None:
        return self.raw() or self.default

    def text(self, default: str) -> str:
        """The value, or ``default`` when unset (for defaults computed from the ``var/``)."""
        return self.raw() or default

    def integer(self) -> int:
        value = self.get()
        try:
            number = int(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise SettingError(f"{self.name}={value!r} is not an integer") from None
        return self._within(number, value)

    def number(self) -> float:
        value = self.get()
        try:
            number = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise SettingError(f"{self.name}={value!r} is not a number") from None
        if not math.isfinite(number):  # float() takes "nan" and "inf"; no budget or limit means either
            raise SettingError(f"{self.name}={value!r} is not a finite number")
        return self._within(number, value)

    def port(self, default: int | None = None) -> int:
        """The value as a TCP port (1 to 65535), else ``default``, else the declared default; a SettingError naming
        the setting otherwise."""
        text = self.raw() or (str(default) if default is not None else self.default) or ""
        if not text.isdigit() or not 0 < int(text) < 65536:
            raise SettingError(f"{self.name}={text!r} is not a TCP port")
        return int(text)

    def _within(self, number: float, value: str | None) -> float:
        """``number`` when it is not below the setting's least value; a SettingError naming the setting and its value
        otherwise (a negative budget or a limit of 0 would act as something else without a word)."""
        if self.minimum is not None and number < self.minimum:
            raise SettingError(f"{self.name}={value!r} is less than {self.minimum:g}, the least it can be")
        return number

    def flag(self) -> bool:
        return truthy(self.get())

    def choice(self, choices: Iterable[str]) -> str:
        """The value, in lower case, when it is one of ``choices``; a SettingError naming the setting and the choices
        otherwise."""
        value = (self.get() or "").lower()
        allowed = list(choices)
        if value not in allowed:
            raise SettingError(f"{self.name} must be one of {', '.join(allowed)}, not {value!r}")
        return value


def truthy(text: str | bool | None) -> bool:
    """Whether a text says yes, as a variable, a DAG param rendered into a job argument or an operator field does
    ("1", "true", "yes", "on"; any case, blanks around it ignored); a bool is itself."""
    if isinstance(text, bool):
        return text
    return str(text or "").strip().lower() in ("1", "true", "yes", "on")


class SettingError(ConfigurationError):
    """A setting has a value the project cannot use; the message names the variable."""


SETTINGS: dict[str, Setting] = {}


def define(
    name: str,
    default: str | None,
    description: str,
    section: str,
    minimum: float | None = None,
) -> Setting:
    """Declare the environment variable ``name`` once (a second declaration is an error) and return its Setting."""
    if name in SETTINGS:
        raise RuntimeError(f"{name} is defined twice")
    SETTINGS[name] = setting = Setting(name, default, description, section, minimum)
    return setting


def configuration_table() -> str:
    """The Markdown table of every setting (``docs/configuration.md`` holds it; a test keeps the two equal)."""
    lines = ["| variable | default | meaning |", "|---|---|---|"]
    for setting in SETTINGS.values():
        default = f"`{setting.default}`" if setting.default is not None else "unset"
        least = f"; at least {setting.minimum:g}" if setting.minimum is not None else ""
        lines.append(f"| `{setting.name}` | {default} | {setting.description}{least} |")
    return "\n".join(lines) + "\n"
