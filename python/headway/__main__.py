"""The `headway` command (also `python -m headway`): the whole CLI is native, in `headway._native`."""

import sys

from headway import _native


def main() -> int:
    return _native.main(sys.argv)


if __name__ == "__main__":
    sys.exit(main())
