"""Downloading dataset archives into a cache directory, checksum-verified."""

import dataclasses
import hashlib
import pathlib
import shutil
import tempfile
import urllib.request
import zipfile


@dataclasses.dataclass(frozen=True)
class Archive:
  """A zip archive published at `url` whose bytes hash to `sha256`."""
  url: str
  sha256: str
  folder: str  # the top-level folder the archive extracts to


class ChecksumError(ValueError):
  """A downloaded archive does not match its published checksum."""


def fetch(archive: Archive, cache_dir: str | pathlib.Path) -> pathlib.Path:
  """Returns `cache_dir/archive.folder`, downloading and extracting it if absent.

  The archive is streamed to a temporary file, its SHA-256 checked, and
  extracted into a temporary directory that is renamed into place only when
  complete, so an interrupted or corrupted download never leaves a folder
  that a later call would mistake for a good one.

  Raises:
    ChecksumError: the bytes at `archive.url` do not hash to `archive.sha256`.
    OSError (urllib.error.URLError included): the download itself failed.
  """
  cache = pathlib.Path(cache_dir)
  target = cache / archive.folder
  if target.is_dir() and any(target.iterdir()):
    return target
  if target.is_dir():  # an empty folder left by hand: no extraction made it
    target.rmdir()
  cache.mkdir(parents=True, exist_ok=True)
  with tempfile.TemporaryDirectory(dir=cache, prefix='.fetch-') as tmp:
    zip_path = pathlib.Path(tmp) / 'archive.zip'
    digest = hashlib.sha256()
    with urllib.request.urlopen(archive.url) as response, open(zip_path, 'wb') as out:
      while chunk := response.read(1 << 20):
        digest.update(chunk)
        out.write(chunk)
    if digest.hexdigest() != archive.sha256:
      raise ChecksumError(
          f'{archive.url}: SHA-256 {digest.hexdigest()} does not match the '
          f'published {archive.sha256}; the download is corrupt or the file '
          'changed upstream. Nothing was written to the cache; retry, or '
          'download and extract it by hand.')
    extracted = pathlib.Path(tmp) / 'extracted'
    with zipfile.ZipFile(zip_path) as zf:
      zf.extractall(extracted)
    if not (extracted / archive.folder).is_dir():
      raise ChecksumError(f'{archive.url}: archive has no top-level folder '
                          f'{archive.folder!r}')
    shutil.move(str(extracted / archive.folder), target)
  return target
