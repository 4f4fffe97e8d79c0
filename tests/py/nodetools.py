"""npm packages for the tests, installed into $DEEPMT_BUILD/node (ignored by git).

node_modules() returns that node_modules folder once the packages are there
(installing them with npm when missing), or None with the reason, so the tests
that need them can skip with a message where npm or the registry is unreachable.
"""

import os
import shutil
import subprocess

from testutil import repo_path

PACKAGES = ["@apidevtools/swagger-parser@10", "libretranslate@1"]


def node_modules():
    """-> (path to node_modules, None) or (None, why not)."""
    prefix = repo_path(os.path.join(os.environ.get("DEEPMT_BUILD", "build"), "node"))
    mods = os.path.join(prefix, "node_modules")
    if all(os.path.isdir(os.path.join(mods, p.rsplit("@", 1)[0])) for p in PACKAGES):
        return mods, None
    if not shutil.which("node") or not shutil.which("npm"):
        return None, "node or npm not installed (scripts/deps.sh test installs them)"
    os.makedirs(prefix, exist_ok=True)
    try:
        r = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", prefix, *PACKAGES],
                           capture_output=True, timeout=300)
    except subprocess.TimeoutExpired:
        return None, "npm install timed out (registry unreachable?)"
    if r.returncode != 0:
        return None, "npm install failed (registry unreachable?): " + r.stderr.decode(errors="replace")[-300:]
    return mods, None
