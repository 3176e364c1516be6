"""The architecture include files P4 programs pull in with ``#include <...>``: ``core.p4`` and
``v1model.p4``, written by this project from the P4-16 and v1model specifications (p4c keeps its
own in a folder of the same name). Data only: nothing here is imported by code but the path."""

from pathlib import Path

INCLUDE_DIR = Path(__file__).parent
