# SPDX-License-Identifier: GPL-3.0-or-later
"""Finding model weights: a local folder, or the Hugging Face hub through its cache.

- Local folder (``weights_dir``, settings.py): ``<dir>/<repo name>/`` holding the
  repo's files (e.g. ``sapiens2-seg-0.4b/config.json`` + ``model.safetensors``), or for single-file
  checkpoints the file itself directly in ``<dir>``.
- Hub: ``huggingface_hub`` with its cache (``HF_HOME`` / ``HF_HUB_CACHE``), ``HF_HUB_OFFLINE``,
  tokens (``HF_TOKEN`` or ``hf auth login``) for gated repos, resumable downloads whose progress
  is forwarded to the server's progress channel.

Every failure becomes a ``BackendError`` whose message says what is missing and what to do.
"""

from __future__ import annotations

import errno
import json
import logging
import os
from pathlib import Path

from ..dataplane.base import BackendError, CancelToken, ProgressFn, no_progress

log = logging.getLogger(__name__)

TRANSFORMERS_WEIGHTS = "model.safetensors"
TRANSFORMERS_INDEX = "model.safetensors.index.json"


def hub_cache_dir() -> Path:
    """The hub cache as huggingface_hub resolves it, read now (not at import time)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "huggingface")
    return Path(home).expanduser() / "hub"


def hub_offline() -> bool:
    flag = os.environ.get("HF_HUB_OFFLINE", "")
    return flag.strip().upper() in ("1", "ON", "YES", "TRUE")


def _local_repo_dir(weights_dir: Path | None, repo_id: str) -> Path | None:
    if weights_dir is None:
        return None
    candidate = Path(weights_dir) / repo_id.split("/")[-1]
    return candidate if candidate.is_dir() else None


class _ForwardingBar:
    """Builds a tqdm class for huggingface_hub that reports bytes to ``progress`` and polls cancel."""

    @staticmethod
    def make(progress: ProgressFn, label: str, cancel: CancelToken | None):
        from tqdm.std import tqdm

        class Bar(tqdm):
            def __init__(self, *args, **kwargs):
                kwargs["disable"] = True  # no terminal output; we count ourselves
                super().__init__(*args, **kwargs)
                self.done = int(kwargs.get("initial") or 0)

            def update(self, n=1):
                self.done += int(n or 0)
                self.n = self.done
                total = self.total or None
                mb = self.done / 1e6
                text = f"downloading {label}: {mb:.0f}" + (f" / {total / 1e6:.0f} MB" if total else " MB")
                progress("download", (self.done / total) if total else None, text)
                if cancel is not None:
                    cancel.check()  # the partial file stays; the next download resumes it

        return Bar


def _hub_error(exc: Exception, repo_id: str, filename: str, weights_dir: Path | None) -> BackendError:
    from huggingface_hub import errors

    where = hub_cache_dir()
    local_hint = (f" or put the file in {Path(weights_dir) / repo_id.split('/')[-1]}/"
                  if weights_dir else " or pass a local folder (--weights-dir <dir> or SAPIENS_WEIGHTS_DIR=<dir>, with <dir>/"
                  f"{repo_id.split('/')[-1]}/{filename})")
    if isinstance(exc, errors.GatedRepoError):
        return BackendError(
            f"{repo_id} is a gated repository: accept its licence at https://huggingface.co/{repo_id} "
            "and give a token (HF_TOKEN=<token> or `hf auth login`).", status=403)
    if isinstance(exc, errors.RepositoryNotFoundError):
        return BackendError(
            f"repository {repo_id} was not found on the hub (or it is private/gated and no valid token "
            "was given: set HF_TOKEN or run `hf auth login`).", status=404)
    # LocalEntryNotFoundError (not cached, offline) subclasses EntryNotFoundError: test it first.
    if isinstance(exc, errors.LocalEntryNotFoundError) or hub_offline():
        return BackendError(
            f"weights not available offline: {repo_id} file {filename} is not in the Hugging Face "
            f"cache {where} and downloading is off or failed (HF_HUB_OFFLINE={os.environ.get('HF_HUB_OFFLINE', '0')}). "
            f"On a machine with internet run `hf download {repo_id} {filename}` (same HF_HOME) and copy "
            f"the cache here,{local_hint}.", status=503)
    if isinstance(exc, (errors.RemoteEntryNotFoundError, errors.EntryNotFoundError)):
        return BackendError(f"{repo_id} has no file {filename}.", status=404)
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return BackendError(
            f"disk full while downloading {repo_id}/{filename} into {where}: free space there or point "
            "HF_HUB_CACHE to a larger disk, then retry (the download resumes).", status=507)
    return BackendError(f"could not fetch {repo_id}/{filename}: {exc}", status=502)


def fetch_file(repo_id: str, filename: str, progress: ProgressFn = no_progress,
               cancel: CancelToken | None = None, weights_dir: Path | None = None) -> Path:
    """Path of ``filename`` from a local folder or the hub cache (downloading it if allowed)."""
    for folder in filter(None, (_local_repo_dir(weights_dir, repo_id), weights_dir)):
        if (Path(folder) / filename).is_file():
            return Path(folder) / filename
    from huggingface_hub import hf_hub_download

    try:
        path = hf_hub_download(
            repo_id, filename, cache_dir=str(hub_cache_dir()), local_files_only=hub_offline(),
            token=os.environ.get("HF_TOKEN") or None,
            tqdm_class=_ForwardingBar.make(progress, f"{repo_id}/{filename}", cancel))
    except BackendError:
        raise
    except Exception as exc:
        from ..dataplane.base import Cancelled

        if isinstance(exc, Cancelled):
            raise
        raise _hub_error(exc, repo_id, filename, weights_dir) from exc
    return Path(path)


def fetch_transformers_repo(repo_id: str, progress: ProgressFn = no_progress,
                            cancel: CancelToken | None = None, weights_dir: Path | None = None) -> Path:
    """Folder holding ``config.json`` and the weights it names, ready for ``from_pretrained``.

    Only the files the model needs are fetched: config.json, then ``transformers_weights`` if the
    config names one (the original ``sapiens2_*.safetensors``), else ``model.safetensors`` (or its
    shard index and shards).
    """
    local = _local_repo_dir(weights_dir, repo_id)
    if local is not None and (local / "config.json").is_file():
        return local
    config_path = fetch_file(repo_id, "config.json", progress, cancel, weights_dir)
    folder = config_path.parent
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BackendError(f"{config_path} is not valid JSON ({exc}); delete it and retry", status=500) from exc
    try:  # optional: the preprocessing size lives here (small; absent in some repos)
        fetch_file(repo_id, "preprocessor_config.json", progress, cancel, weights_dir)
    except BackendError:
        pass
    named = config.get("transformers_weights")
    if named:
        fetch_file(repo_id, named, progress, cancel, weights_dir)
        return folder
    try:
        fetch_file(repo_id, TRANSFORMERS_WEIGHTS, progress, cancel, weights_dir)
    except BackendError as single_error:
        try:
            index_path = fetch_file(repo_id, TRANSFORMERS_INDEX, progress, cancel, weights_dir)
        except BackendError:
            raise single_error from None
        shards = sorted(set(json.loads(index_path.read_text(encoding="utf-8"))["weight_map"].values()))
        for shard in shards:
            fetch_file(repo_id, shard, progress, cancel, weights_dir)
    return folder


def cached_or_downloadable(repo_id: str, filenames: list[str] | None = None,
                           weights_dir: Path | None = None) -> bool:
    """Cheap check (no network): the files are in the local folder or the cache, or downloads are
    allowed. ``filenames`` None means a transformers repo (config.json + its weights)."""
    local = _local_repo_dir(weights_dir, repo_id)
    names = filenames or ["config.json"]
    if local is not None and all((local / n).is_file() for n in names):
        return True
    if weights_dir is not None and filenames and all((Path(weights_dir) / n).is_file() for n in names):
        return True
    if not hub_offline():
        return True
    from huggingface_hub import try_to_load_from_cache

    def cached(name):
        hit = try_to_load_from_cache(repo_id, name, cache_dir=str(hub_cache_dir()))
        return isinstance(hit, str) and os.path.isfile(hit)

    if not all(cached(n) for n in names):
        return False
    if filenames is None:
        config = json.loads(Path(try_to_load_from_cache(repo_id, "config.json",
                                                        cache_dir=str(hub_cache_dir()))).read_text())
        return cached(config.get("transformers_weights") or TRANSFORMERS_WEIGHTS) or cached(TRANSFORMERS_INDEX)
    return True


def corrupt_weights_error(path: Path | str, exc: Exception) -> BackendError:
    return BackendError(
        f"the weights file {path} is corrupt or truncated ({type(exc).__name__}: {exc}). Delete it "
        "(and its blob in the hub cache) and retry to download it again.", status=500)
