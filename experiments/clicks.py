"""CTR files in DIN's form made from sequence files, for the reproduction scripts'
CTR tables on Amazon Beauty: written once per sequences, history length and seed."""

import hashlib
import json
import pathlib

from experiments import files
from tff_rec.data import sequence_clicks
from tff_rec.data import user_items


def clicks_file(sequences: str | pathlib.Path, out: pathlib.Path, *, seed: int,
                history_length: int = 10) -> pathlib.Path:
  """`out`, a CTR file in DIN's form (tff_rec.data.sequence_clicks) of a
  `uid item item ...` sequence file. It is written again unless `out` exists
  with a record (out.json) of these very sequences, history length and seed:
  they fix its rows."""
  made_from = {'sequences_sha256': hashlib.sha256(pathlib.Path(sequences).read_bytes())
               .hexdigest(), 'history_length': history_length, 'seed': seed}
  record = out.with_suffix(out.suffix + '.json')
  if not (out.exists() and record.exists() and json.loads(record.read_text()) == made_from):
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = sequence_clicks.din_rows(user_items.read_lines(pathlib.Path(sequences)),
                                    history_length=history_length, seed=seed)
    files.write_text(out, rows.to_csv(index=False))
    files.write_json(record, made_from)
  return out


# The task settings that read a clicks_file.
_COLUMNS = sequence_clicks.CTR_COLUMNS
CLICKS_FILE_COLUMNS = dict(client_column=_COLUMNS.client, feature_columns=_COLUMNS.features,
                           list_columns=_COLUMNS.list_features, test_column=_COLUMNS.test)


def clicks_task(sequences: str | pathlib.Path, runs_dir: str, seed: int, *,
                make: bool = True) -> dict:
  """ctr's settings for one seed's clicks_file of `sequences`, kept under
  runs_dir/data: each seed draws its own non-clicks. Without `make` the file is
  named, not made (or checked): enough for a cell that will not run, whose record
  is matched by the file's name, so a table rebuilds without the data."""
  name = f'{pathlib.Path(sequences).stem.lower()}_clicks_s{seed}.csv'
  path = pathlib.Path(runs_dir) / 'data' / name
  if make:
    clicks_file(sequences, path, seed=seed)
  return dict(data_dir=str(path), **CLICKS_FILE_COLUMNS)
