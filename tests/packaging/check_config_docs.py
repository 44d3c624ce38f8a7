#!/usr/bin/env python3
"""Docs follow code: every environment variable a plugin registers with the SDK's parameter
registry (STRAND_PARAM_* in net_*/, collnet_stub/ and gin_proxy/) must appear in docs/configuration.md, and every STRAND_*
variable that page names must still exist in the code (no stale entries)."""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
doc = (root / "docs" / "configuration.md").read_text()
registered = set()
for src in [*root.glob("net_*/**/*.c"), *root.glob("collnet_stub/**/*.c"), *root.glob("gin_proxy/**/*.c")]:
    for m in re.finditer(r'STRAND_PARAM_(?:INT|BOOL|STRING|ENUM)\(\s*"([A-Z0-9_]+)"(?:\s*,\s*"([A-Z0-9_]+)")?',
                         src.read_text()):
        registered.update(n for n in m.groups() if n)

documented = set(re.findall(r"`((?:STRAND|NCCL|FI)_[A-Z0-9_]+)`", doc))
missing = sorted(n for n in registered if n not in documented)
# A documented STRAND_ variable must be registered somewhere.
stale = sorted(n for n in documented if n.startswith("STRAND_") and n not in registered)
for n in missing:
    print(f"docs/configuration.md does not document {n}, which the code registers")
for n in stale:
    print(f"docs/configuration.md documents {n}, which no plugin registers any more")
if not registered:
    print("found no registered parameters at all: the scan is broken")
    sys.exit(1)
print(f"{len(registered)} registered variables, all documented" if not (missing or stale) else "")
sys.exit(1 if missing or stale else 0)
