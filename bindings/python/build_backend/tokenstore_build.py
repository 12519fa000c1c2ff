"""A PEP 517 build backend for the binding, standard library only.

The binding is two pure-Python files, so the wheel is a zip of them plus the metadata
PEP 427 asks for. Being in the tree (backend-path in pyproject.toml) and needing nothing,
`pip install bindings/python` builds offline, in any venv, with or without build
isolation, and writes nothing into the source folder.
"""

import base64
import hashlib
import os
import zipfile

NAME = "tokenstore"
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(HERE, NAME)
SUMMARY = ("TokenStore: sealed token storage in the Secret Service, with OAuth session renewal "
           "and logout (ctypes binding of libtokenstore.so.1)")


def _version():
    # bindings/python/../../VERSION, the one version of the project.
    with open(os.path.join(HERE, "..", "..", "VERSION"), encoding="utf-8") as handle:
        return handle.read().strip()


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def _metadata():
    return (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {_version()}\nSummary: {SUMMARY}\n"
            "Requires-Python: >=3.9\n")


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    version = _version()
    wheel_name = f"{NAME}-{version}-py3-none-any.whl"
    dist_info = f"{NAME}-{version}.dist-info"
    entries = []
    for file in sorted(os.listdir(PACKAGE)):
        if file.endswith(".py"):
            with open(os.path.join(PACKAGE, file), "rb") as handle:
                entries.append((f"{NAME}/{file}", handle.read()))
    entries.append((f"{dist_info}/METADATA", _metadata().encode()))
    entries.append((f"{dist_info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: tokenstore_build\n"
                    b"Root-Is-Purelib: true\nTag: py3-none-any\n"))
    entries.append((f"{dist_info}/top_level.txt", f"{NAME}\n".encode()))
    record = [_record_line(path, data) for path, data in entries] + [f"{dist_info}/RECORD,,"]
    entries.append((f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode()))
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w", zipfile.ZIP_DEFLATED) as wheel:
        for path, data in entries:
            wheel.writestr(zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0)), data,
                           compress_type=zipfile.ZIP_DEFLATED)
    return wheel_name


def build_sdist(sdist_directory, config_settings=None):
    raise NotImplementedError("the binding is built from the TokenStore repository (bindings/python)")
