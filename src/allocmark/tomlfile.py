"""Reading a catalog or suite TOML file; its contents are checked by schemas/."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from allocmark.errors import UserError


def load(path: Path) -> dict[str, Any]:
    """Parse `path`; a missing or malformed file is a UserError naming it."""
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, expected a TOML file") from None
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{path}: invalid TOML: {e}") from None
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: not UTF-8 text (byte {e.start}); TOML files are UTF-8") from None
    except RecursionError:
        raise UserError(f"{path}: values nested too deeply to be a suite or catalog") from None
