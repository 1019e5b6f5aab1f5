"""Model sources on the Hugging Face hub: `model_source: hf://ORG/NAME@REVISION` (or the
repo id alone, with `model_revision`), resolved on the controller into a folder the weights
role copies exactly as it copies a local one.

Why huggingface_hub and not our own reading of the cache: it parses hf:// URIs
(`parse_hf_uri`), validates repo ids, honours HF_HOME / HF_HUB_CACHE / HF_HUB_OFFLINE and the
token the operator logged in with, resolves a branch or tag to its commit from the cache's refs
when offline, and downloads into the cache when online (`snapshot_download`).

What vfleet adds, before any byte is copied to a host:
- every file of the snapshot is checked against the hash the hub recorded for it. The cache
  names each blob by the file's ETag, which the hub sets to the sha256 of an LFS (or Xet) file
  and to the git blob sha1 of a regular one; a blob whose content does not hash to its name,
  a snapshot entry that is not a link into its repo's blobs, or a link that leaves the cache
  ends the run in one line naming the file, and nothing is copied;
- the verified files are exported as links in a folder of vfleet's own, keyed by the commit,
  with MANIFEST.sha256 beside them (written from the hashes just computed, after the whole
  snapshot verified, by a rename): the user's cache is never written to, and the copy's id
  changes exactly when the commit does, so a branch that moved is a change deploy and
  `--check` show before a byte is copied."""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from vfleet.engine.controller_cache import controller_cache
from vfleet.engine.errors import VfleetError
from vfleet.engine.pathrules import HUB_SCHEME, hub_problem
from vfleet.roles.model_source._manifest import MANIFEST_NAME, sha256_file

__all__ = ["HubError", "HubRef", "Export", "is_hub", "parse", "resolve", "export_root", "never_download", "find_export"]

GIT_BLOB_LIMIT = 64 * 1024 * 1024  # a regular (non-LFS) git file; the hub sends larger ones through LFS
_SHA256 = re.compile(r"[0-9a-f]{64}")
_SHA1 = re.compile(r"[0-9a-f]{40}")


class HubError(VfleetError):
    """A hub source that cannot be used: one line naming the source, the file and the fix."""


@dataclass(frozen=True)
class HubRef:
    """A model repository on the hub and the revision asked for (a branch, tag or commit)."""

    repo_id: str
    revision: str
    what: str = field(default="model_source", compare=False)  # the variable errors name

    @property
    def spec(self) -> str:
        return f"{HUB_SCHEME}{self.repo_id}@{self.revision}"


@dataclass(frozen=True)
class Export:
    """A verified snapshot: the commit the revision resolved to, and vfleet's folder of it."""

    ref: HubRef
    commit: str
    folder: Path


def is_hub(spec: str | None) -> bool:
    return bool(spec) and str(spec).startswith(HUB_SCHEME)


def parse(spec: str, default_revision: str | None = None, what: str = "model_source") -> HubRef:
    """`hf://ORG/NAME[@REVISION]` as a HubRef (the revision from the URI, else
    `default_revision`, else main); what the schema refuses (pathrules.hub_problem): HubError.
    `what`: the variable that named it, for errors (model_source, lora_adapters[NAME].source)."""
    from huggingface_hub.utils import parse_hf_uri

    why = hub_problem(spec)
    if why:
        raise HubError(f"{what} {spec}: {why}")
    uri = parse_hf_uri(spec)
    return HubRef(uri.id, uri.revision or default_revision or "main", what)


_cache_only = False


def never_download() -> None:
    """From now on, in this process, resolve from the cache only, as with HF_HUB_OFFLINE: for
    read-only views (`vfleet status`), which must not start a download to show a fleet."""
    global _cache_only
    _cache_only = True


def export_root() -> Path:
    """Where vfleet keeps its exports: $XDG_CACHE_HOME/vfleet/hf (default ~/.cache)."""
    return controller_cache("hf")


def _one_line(e: BaseException) -> str:
    """An exception's text on one line (the hub's errors span several)."""
    return " ".join(str(e).split()) or type(e).__name__


def _snapshot(ref: HubRef) -> Path:
    """The snapshot folder of `ref` in the cache: downloaded into it when online, read from it
    when HF_HUB_OFFLINE is set (the hub's own errors, each turned into one line)."""
    from huggingface_hub import constants, errors as hub_errors, is_offline_mode, snapshot_download

    offline = is_offline_mode() or _cache_only
    try:
        return Path(snapshot_download(ref.repo_id, revision=ref.revision, local_files_only=offline))
    except hub_errors.LocalEntryNotFoundError:
        how = (
            ("vfleet status never downloads" if _cache_only else "HF_HUB_OFFLINE is set")
            if offline
            else "the hub cannot be reached"
        )
        raise HubError(
            f"{ref.what} {ref.spec}: revision {ref.revision!r} is not in the Hugging Face cache "
            f"({constants.HF_HUB_CACHE}) and {how}; run `{shlex.join(['hf', 'download', ref.repo_id, '--revision', ref.revision])}` "
            "where the hub is reachable, with the same HF_HOME"
        ) from None
    except (hub_errors.RepositoryNotFoundError, hub_errors.RevisionNotFoundError, hub_errors.GatedRepoError) as e:
        raise HubError(
            f"{ref.what} {ref.spec}: {_one_line(e).split(' Request ID')[0]}; check the name, "
            "the revision and `hf auth login`"
        ) from None
    except (hub_errors.HfHubHTTPError, OSError) as e:
        raise HubError(f"{ref.what} {ref.spec}: the download failed: {_one_line(e)}; a re-run resumes it") from None


def _file_sha256(path: Path, etag: str) -> str:
    """The file's sha256 after its content matched its blob's name (`etag`): a sha256 for an
    LFS file, the git blob sha1 of a regular one ("" when it did not)."""
    if _SHA256.fullmatch(etag):
        return etag if sha256_file(path) == etag else ""
    if _SHA1.fullmatch(etag) and path.stat().st_size <= GIT_BLOB_LIMIT:
        from huggingface_hub.utils.sha import git_hash

        data = path.read_bytes()
        return hashlib.sha256(data).hexdigest() if git_hash(data) == etag else ""
    return ""


def _verified(ref: HubRef, snapshot: Path) -> dict[str, tuple[Path, str]]:
    """{relative name: (blob path, sha256)} of every file of the snapshot, each proven to be a
    link into its repo's blobs whose content hashes to the blob's name (module doc)."""
    from huggingface_hub import constants

    blobs = (snapshot.parent.parent / "blobs").resolve()
    cache = Path(constants.HF_HUB_CACHE).resolve()
    files: dict[str, tuple[Path, str]] = {}
    for entry in sorted(snapshot.rglob("*")):
        name = entry.relative_to(snapshot).as_posix()
        if entry.is_dir() and not entry.is_symlink():
            continue
        if "\n" in name or "\\" in name or name == MANIFEST_NAME:
            raise HubError(
                f"{ref.what} {ref.spec}: {name!r}: a file name vfleet does not copy; remove it from the repo"
            )
        if not entry.is_symlink():
            raise HubError(
                f"{ref.what} {ref.spec}: {name} is not a link into the cache's blobs, so no hash "
                f"is recorded for it; delete {snapshot} and download the revision again"
            )
        first_hop = Path(os.path.abspath(entry.parent / os.readlink(entry)))
        in_blobs = first_hop.parent.resolve() == blobs
        target = entry.resolve()
        if in_blobs and not target.exists():
            raise HubError(
                f"{ref.what} {ref.spec}: {name}: its blob {first_hop.name[:16]}... is missing from the "
                "cache; download the revision again"
            )
        if not in_blobs or not target.is_relative_to(cache) or not target.is_file():
            raise HubError(
                f"{ref.what} {ref.spec}: {name} links to {os.readlink(entry)}, outside the repo's "
                f"blobs in {cache}; delete {snapshot} and download the revision again"
            )
        try:
            sha256 = _file_sha256(target, first_hop.name)
        except OSError as e:
            raise HubError(
                f"{ref.what} {ref.spec}: {name}: cannot read its blob {target}: {e.strerror or e}; "
                "run vfleet as a user who can read the Hugging Face cache"
            ) from None
        if not sha256:
            raise HubError(
                f"{ref.what} {ref.spec}: {name} does not match the hash the hub recorded for it "
                f"({first_hop.name[:16]}...); the cache is damaged: delete {first_hop} and download "
                "the revision again"
            )
        files[name] = (target, sha256)
    if not files:
        raise HubError(f"{ref.what} {ref.spec}: the snapshot {snapshot} is empty; download the revision again")
    return files


def _write_export(folder: Path, files: dict[str, tuple[Path, str]]) -> None:
    """Links to the verified blobs and their manifest, made beside `folder` and renamed onto it."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        for name, (blob, _) in files.items():
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            os.symlink(blob, tmp / name)
        lines = "".join(f"{sha}  {name}\n" for name, (_, sha) in sorted(files.items()))
        (tmp / MANIFEST_NAME).write_text(lines)
        os.rename(tmp, folder)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not (folder / MANIFEST_NAME).is_file():  # not a run beside this one that finished first
            raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _export_folder(ref: HubRef, commit: str) -> Path:
    return export_root() / ("models--" + ref.repo_id.replace("/", "--")) / commit


def _whole(folder: Path) -> bool:
    """An export with its manifest whose every link still reaches its blob."""
    return (folder / MANIFEST_NAME).is_file() and all(p.exists() for p in folder.rglob("*"))


def find_export(ref: HubRef) -> Export | None:
    """The export of `ref` if this controller made it already, else None: nothing is hashed
    or written (a read-only view must not hash a 140 GB snapshot)."""
    commit = _snapshot(ref).name
    folder = _export_folder(ref, commit)
    return Export(ref, commit, folder) if _whole(folder) else None


def resolve(ref: HubRef) -> Export:
    """The verified export of `ref` (made once per commit; a re-run finds it in place)."""
    snapshot = _snapshot(ref)
    commit = snapshot.name
    folder = _export_folder(ref, commit)
    if not _whole(folder):  # never made, interrupted, or its blobs were deleted from the cache since
        try:
            if folder.exists():
                shutil.rmtree(folder)
            _write_export(folder, _verified(ref, snapshot))
        except OSError as e:
            raise HubError(
                f"{ref.what} {ref.spec}: cannot write vfleet's export {folder}: {e.strerror or e}; "
                "free space there or point XDG_CACHE_HOME elsewhere"
            ) from None
    return Export(ref, commit, folder)
