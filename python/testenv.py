"""What the python tests (`make python-test`) share: torch, required or
skipped as SAMPVIZ_REQUIRE_PYTHON says, and the sampviz binary they check
their dumps with. Not a test module itself.
"""

import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def require_torch(torch):
    """Skips the calling test module when torch (its import, or None) is
    missing; with SAMPVIZ_REQUIRE_PYTHON=1 (CI) raises instead."""
    if torch is not None:
        return
    msg = "torch is not installed for this Python (make python-deps installs Debian's python3-torch)"
    if os.environ.get("SAMPVIZ_REQUIRE_PYTHON") == "1":
        raise RuntimeError(msg + ", and SAMPVIZ_REQUIRE_PYTHON=1 requires these tests")
    print(f"python-test: skipped: {msg}", file=sys.stderr)
    raise unittest.SkipTest(msg)


def sampviz_bin():
    """The sampviz binary: $SAMPVIZ_BIN (make python-test sets it), else one
    `go build` makes in a temporary folder."""
    path = os.environ.get("SAMPVIZ_BIN")
    if not path:
        path = os.path.join(tempfile.mkdtemp(prefix="sampviz-bin-"), "sampviz")
        subprocess.run(["go", "build", "-o", path, "./cmd/sampviz"], cwd=ROOT, check=True)
    return path
