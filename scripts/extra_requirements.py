"""Print the requirements of some of pyproject.toml's extras, one per line.

scripts/setup.sh installs these when a target asks for an extra the virtualenv does
not have yet, so adding ``spark`` to an environment set up for ``test`` installs
pyspark and its few dependencies, not the package and every other extra again.

    python scripts/extra_requirements.py spark capture
"""

from __future__ import annotations

import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pip carries a TOML reader of its own
    from pip._vendor import tomli as tomllib  # type: ignore[no-redef]

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def extra_requirements(pyproject: dict, extras: list[str]) -> list[str]:
    """The requirements of ``extras``, in order, each once; an unknown extra raises KeyError."""
    optional = pyproject["project"].get("optional-dependencies", {})
    unknown = [extra for extra in extras if extra not in optional]
    if unknown:
        raise KeyError(f"pyproject.toml has no extra {', '.join(unknown)} (it has {', '.join(sorted(optional))})")
    wanted: list[str] = []
    for extra in extras:
        for requirement in optional[extra]:
            if requirement not in wanted:
                wanted.append(requirement)
    return wanted


def main(argv: list[str]) -> int:
    with open(PYPROJECT, "rb") as f:
        pyproject = tomllib.load(f)
    try:
        requirements = extra_requirements(pyproject, argv)
    except KeyError as exc:
        print(f"extra_requirements: {exc.args[0]}", file=sys.stderr)
        return 2
    print("\n".join(requirements))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
