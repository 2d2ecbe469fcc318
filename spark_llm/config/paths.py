"""Config values that are paths and image references: checked where a node would refuse them late."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator


def abs_path(v: str) -> str:
    if not v.startswith("/") or "\n" in v or "'" in v:
        raise ValueError("must be an absolute path without quotes or newlines")
    path = v.rstrip("/")
    if not path:
        raise ValueError("is the root directory: give the weights a directory of their own")
    return path


AbsPath = Annotated[str, AfterValidator(abs_path)]


def _image_ref(v: str) -> str:
    """The mistakes `docker pull` would refuse late, on a node: spaces, a URL, uppercase, an empty tag."""
    if not v.strip() or any(c.isspace() for c in v):
        raise ValueError("must be one reference without spaces: REPOSITORY[:TAG][@sha256:DIGEST]")
    if "://" in v:
        raise ValueError("is a URL: write the reference as `docker pull` takes it, e.g. lmsysorg/sglang:spark")
    name = v.split("@", 1)[0]
    first, slash, rest = name.partition("/")
    has_registry = bool(slash) and ("." in first or ":" in first or first == "localhost")
    repository, colon, tag = (rest if has_registry else name).partition(":")
    if (colon and not tag) or v.endswith("@"):
        raise ValueError("has an empty tag or digest: write the tag after ':' (or leave ':' out for latest)")
    if repository != repository.lower():
        raise ValueError(f"must be lowercase (docker refuses {repository!r}): {repository.lower()}")
    return v


ImageRef = Annotated[str, AfterValidator(_image_ref)]
