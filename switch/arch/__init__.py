"""Architecture include files (core.p4, v1model.p4) that P4 programs pull in with ``#include <...>``."""

from pathlib import Path

ARCH_DIR = Path(__file__).parent
