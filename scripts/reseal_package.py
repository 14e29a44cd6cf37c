#!/usr/bin/env python3
"""Recomputes the file digests of a package's integrity record after a deliberate change.

usage: reseal_package.py PKG

metadata.json ends with an "integrity" record (src/wrapper/Package.h, docs/PACKAGE.md): the
SHA-256 of its body and of each package file. Test tools that break a package on purpose (a
kernel changed and model.so rebuilt, a fatbin recompiled) call reseal() afterwards, so that
the runtime loads the package and the test sees the change it made, not an integrity error.
The body of metadata.json is kept as it is: model.so still names it. Never a way to make an
edited metadata.json load: its body digest is recomputed only with --body.
"""
import hashlib
import json
import os
import sys

SEPARATOR = ',\n  "integrity": '


def _sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def reseal(pkg, body=False):
    path = os.path.join(pkg, "metadata.json")
    text = open(path, encoding="utf-8").read()
    at = text.rfind(SEPARATOR)
    if at < 0:
        raise SystemExit(f"{path}: no integrity record")
    record = json.loads("{" + text[at + 1:])["integrity"]
    head = text[:at]
    digest = hashlib.sha256((head + "\n}\n").encode()).hexdigest() if body else record["metadata"]
    files = ",\n      ".join(f'"{f}": "{_sha(os.path.join(pkg, f))}"' for f in record["files"])
    tail = (f'{SEPARATOR}{{"algorithm": "sha256", "model_abi_version": '
            f'{record["model_abi_version"]},\n    "metadata": "{digest}",\n    "files": {{\n'
            f'      {files}\n    }}}}\n}}\n')
    tmp = path + ".reseal"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(head + tail)
    os.replace(tmp, path)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    reseal(sys.argv[1], body="--body" in sys.argv[2:])
