"""The papers' headline claims, judged from the committed records by the one rule
(experiments.verdicts) and written as the verdict rows of results/ READMEs.

A claim is data (results/claims.toml): one or more comparisons of two rows, each
row a cell record per seed read one way (the claim's `reading`), with the word the
paper's own numbers give for it (above / level / below) and the floors its rows
are held against. The verdict is computed, never written by hand:

* reproduced: every comparison gets the paper's word;
* not reproduced: some comparison is decided against it;
* not testable: otherwise, some comparison's rows are all below a floor;
* undecided: otherwise (the seeds cannot decide a comparison yet).

  [[claim]]
  paper = "CoLR (Nguyen et al.)"
  claim = "rank-4 updates keep most of FedMF-64's quality"
  data = "ML-100K"
  folder = "colr_movielens"              # results/FOLDER/cells holds the records
  reading = { metric = "test/hr_at_10", last = 1 }
  floors = [{ label = "popularity", derived = "popularity_test_s{seed}", key = "hr_at_10" }]
  [[claim.comparison]]
  a = { label = "CoLR r=4", cells = "colr_r4-client_learning_rate=1-s{seed}" }
  b = { label = "FedMF-64", cells = "fedmf_d64-client_learning_rate=1-s{seed}" }
  paper = "below"

A reading is the mean of each run's last `last` evaluations of `metric` (up to
`at_round` if given); `drop_from` (a row's centralized twin) reads the relative drop
(c - f) / c per seed instead, and `rounds_to` the first round that reaches the best
value of a reference row's curve (less `margin` where higher is better), a run that
never does counting at its last round + 1: both are better lower. A diverged seed
is a result: it reads at its last finite evaluations, and the rows say how many
diverged. Floors are held against the rows' metric values.
"""

import dataclasses
import math
import pathlib
import shutil
import tomllib
from typing import Any

import numpy as np

from experiments import files
from experiments import run_records
from experiments import seed_stats
from experiments import verdicts

REPRODUCED, NOT_REPRODUCED, NOT_TESTABLE, UNDECIDED = (
    'reproduced', 'not reproduced', 'not testable', 'undecided')
PAPER_WORDS = (verdicts.ABOVE, verdicts.LEVEL, verdicts.BELOW)
# Where the generated rows go in a README, and the line that says not to edit them.
BEGIN = ('<!-- verdicts: generated from results/claims.toml by `python -m launch.rebuild_tables '
         '--write`; edit that file, not these lines -->')
END = '<!-- verdicts: end -->'


class ClaimError(ValueError):
  """A claims file that cannot be judged; the message names the claim and the field."""


@dataclasses.dataclass(frozen=True)
class Row:
  label: str
  cells: tuple[str, ...]  # a record per seed
  drop_from: tuple[str, ...] = ()  # the centralized twin's records, seed for seed


@dataclasses.dataclass(frozen=True)
class Floor:
  label: str
  derived: str  # a key of the records' derived.json, {seed} filled in
  key: str | int | None = None  # within that value, if it is a dict or a list


@dataclasses.dataclass(frozen=True)
class Reading:
  metric: str
  last: int = 1
  at_round: int | None = None
  rounds_to: tuple[str, ...] = ()  # the reference row's records, seed for seed
  margin: float = 0.0

  def describe(self) -> str:
    where = f' at round {self.at_round}' if self.at_round else ''
    what = self.metric if self.last == 1 else f'{self.metric}, mean of the last {self.last}'
    return f'{what}{where}'


@dataclasses.dataclass(frozen=True)
class Comparison:
  a: Row
  b: Row
  paper: str  # the paper's word for a against b


@dataclasses.dataclass(frozen=True)
class Claim:
  paper: str
  claim: str
  data: str
  folder: str
  reading: Reading
  comparisons: tuple[Comparison, ...]
  floors: tuple[Floor, ...] = ()
  seeds: tuple[int, ...] = (0, 1, 2)
  note: str = ''  # what the rows are (settings, rounds): explains, never judges


@dataclasses.dataclass(frozen=True)
class Values:
  """A row's reading per seed, the metric beneath it (what floors judge), and how
  many of its seeds diverged."""
  compared: list[float]
  metric: list[float]
  diverged: int
  unreached: int = 0  # rounds_to: seeds that never reach the target (NaN in compared)
  end: float = 0.0  # the last round any of its seeds evaluated


@dataclasses.dataclass(frozen=True)
class Judged:
  comparison: Comparison
  a: Values
  b: Values
  verdict: verdicts.Verdict


def _fields(raw: dict, where: str, required: tuple[str, ...], optional: tuple[str, ...]) -> None:
  missing = [f for f in required if f not in raw]
  unknown = [f for f in raw if f not in required + optional]
  if missing or unknown:
    raise ClaimError(f'{where}: ' + '; '.join(
        [*(f'{f!r} is missing' for f in missing),
         *(f'{f!r} is not a field (fields: {", ".join(required + optional)})' for f in unknown)]))


def _cells(value: Any, seeds: tuple[int, ...], where: str) -> tuple[str, ...]:
  """A template with {seed}, or one record name per seed."""
  if isinstance(value, str) and '{seed}' in value:
    return tuple(value.format(seed=s) for s in seeds)
  if isinstance(value, list) and len(value) == len(seeds) and all(isinstance(v, str) for v in value):
    return tuple(value)
  raise ClaimError(f'{where}: give a record name with {{seed}} or one name per seed '
                   f'({len(seeds)}), not {value!r}')


def _row(raw: dict, seeds, where: str) -> Row:
  _fields(raw, where, ('label', 'cells'), ('drop_from',))
  drop_from = _cells(raw['drop_from'], seeds, where) if 'drop_from' in raw else ()
  return Row(raw['label'], _cells(raw['cells'], seeds, where), drop_from)


def parse(raw: dict, where: str) -> Claim:
  _fields(raw, where, ('paper', 'claim', 'data', 'folder', 'reading', 'comparison'),
          ('floors', 'seeds', 'note'))
  where = f'{where} ({raw["claim"]!r})'
  seeds = tuple(raw.get('seeds', (0, 1, 2)))
  reading = dict(raw['reading'])
  _fields(reading, f'{where} reading', ('metric',), ('last', 'at_round', 'rounds_to', 'margin'))
  if 'rounds_to' in reading:
    reading['rounds_to'] = _cells(reading['rounds_to'], seeds, f'{where} reading')
  comparisons = []
  for i, c in enumerate(raw['comparison']):
    at = f'{where} comparison {i + 1}'
    _fields(c, at, ('a', 'b', 'paper'), ())
    if c['paper'] not in PAPER_WORDS:
      raise ClaimError(f'{at}: paper = {c["paper"]!r}; one of {", ".join(PAPER_WORDS)}')
    comparisons.append(Comparison(_row(c['a'], seeds, f'{at} a'), _row(c['b'], seeds, f'{at} b'),
                                  c['paper']))
  floors = []
  for f in raw.get('floors', ()):
    _fields(f, f'{where} floor', ('label', 'derived'), ('key',))
    floors.append(Floor(**f))
  return Claim(raw['paper'], raw['claim'], raw['data'], raw['folder'], Reading(**reading),
               tuple(comparisons), tuple(floors), seeds, raw.get('note', ''))


def load(path: pathlib.Path) -> list[Claim]:
  try:
    raw = tomllib.loads(path.read_text())
  except tomllib.TOMLDecodeError as e:
    raise ClaimError(f'{path}: {e}') from e
  return [parse(c, f'{path} claim {i + 1}') for i, c in enumerate(raw.get('claim', ()))]


class Reader:
  """A folder's records as claims read them."""

  def __init__(self, results: pathlib.Path, folder: str):
    self.cells = results / folder / 'cells'

  def _curve(self, name: str, metric: str, at_round: int | None):
    """(rounds, finite values) of a finished record; whether it diverged."""
    if not (self.cells / name / 'summary.json').exists():
      raise ClaimError(f'{self.cells / name}: no finished record (a claim reads only '
                       'committed records)')
    diverged = run_records.diverged(files.read_summary(
        self.cells / name / 'summary.json'))
    rows = run_records.read_curve('', name, metric, str(self.cells))
    if rows is None or rows.empty:
      raise ClaimError(f'{self.cells / name}: no {metric} evaluated')
    step = 'epoch' if 'epoch' in rows else 'round'
    rows = rows[np.isfinite(rows[metric])]
    if at_round is not None:
      rows = rows[rows[step] <= at_round]
    return rows[step].to_numpy(), rows[metric].to_numpy(), diverged

  def metric(self, name: str, reading: Reading) -> float:
    return _last_mean(self._curve(name, reading.metric, reading.at_round)[1], reading)

  def target(self, reference: str, reading: Reading) -> float:
    """The best value of the reference's curve, less the margin where higher is better."""
    _, best, _ = self._curve(reference, reading.metric, reading.at_round)
    if verdicts.higher_is_better(reading.metric):
      return best.max() - reading.margin
    return best.min() + reading.margin

  def floor(self, floor: Floor, seed: int) -> float:
    values = run_records.derived(self.cells, floor.derived.format(seed=seed), _no_compute(floor))
    return float(values if floor.key is None else values[floor.key])

  def row(self, row: Row, reading: Reading) -> Values:
    curves = [self._curve(name, reading.metric, reading.at_round) for name in row.cells]
    metric = [_last_mean(values, reading) for _, values, _ in curves]
    diverged = sum(d for *_, d in curves)
    unreached, end = 0, 0.0
    if reading.rounds_to:  # the first round each seed reaches its reference's target
      lower = not verdicts.higher_is_better(reading.metric)
      reached = [run_records.first_reaching(rounds, values, self.target(reference, reading), lower)
                 for (rounds, values, _), reference in zip(curves, reading.rounds_to)]
      compared = [math.nan if r is None else r for r in reached]
      unreached = sum(r is None for r in reached)
      end = max(float(rounds.max()) for rounds, *_ in curves)
    elif row.drop_from:
      central = [self.metric(name, reading) for name in row.drop_from]
      compared = [(c - f) / c for c, f in zip(central, metric)]
    else:
      compared = metric
    return Values(compared, metric, diverged, unreached, end)


def _last_mean(values: np.ndarray, reading: Reading) -> float:
  return float(values[-reading.last:].mean())


def _no_compute(floor: Floor):
  def fail():
    raise ClaimError(f'floor {floor.label!r}: no {floor.derived!r} in the records\' '
                     f'{run_records.DERIVED_FILE} (a claim reads only what a table recorded)')
  return fail


def judge(claim: Claim, results: pathlib.Path) -> tuple[str, list[Judged], dict[str, list[float]]]:
  """The claim's verdict word, each comparison judged, and its floors per seed."""
  reader = Reader(results, claim.folder)
  floors = {f.label: [reader.floor(f, s) for s in claim.seeds] for f in claim.floors}
  judged = []
  for comparison in claim.comparisons:
    a, b = (reader.row(r, claim.reading) for r in (comparison.a, comparison.b))
    if claim.reading.rounds_to:  # a seed that never reached counts one round past the end
      a, b = (dataclasses.replace(v, compared=[
          max(a.end, b.end) + 1 if math.isnan(c) else c for c in v.compared]) for v in (a, b))
    higher = not lower_is_better(claim.reading, comparison)
    floor = verdicts.below_floor(
        (a.metric, b.metric), floors, higher_is_better=verdicts.higher_is_better(
            claim.reading.metric))
    if floor is not None:
      verdict = verdicts.Verdict(verdicts.NOT_TESTABLE, math.nan, math.nan, math.nan,
                                 f'both below {floor}')
    elif a.unreached == len(a.compared) and b.unreached == len(b.compared):
      verdict = verdicts.Verdict(verdicts.NOT_TESTABLE, math.nan, math.nan, math.nan,
                                 'neither reaches the target')
    else:
      verdict = verdicts.compare(a.compared, b.compared, higher_is_better=higher)
    judged.append(Judged(comparison, a, b, verdict))
  return _word(judged), judged, floors


def lower_is_better(reading: Reading, comparison: Comparison) -> bool:
  """Rounds to a target and a drop are better lower; a metric by its name."""
  return bool(reading.rounds_to or comparison.a.drop_from) or not verdicts.higher_is_better(
      reading.metric)


def _word(judged: list[Judged]) -> str:
  words = [(j.verdict.word, j.comparison.paper) for j in judged]
  if any(w in PAPER_WORDS and w != paper for w, paper in words):
    return NOT_REPRODUCED
  if any(w == verdicts.NOT_TESTABLE for w, _ in words):
    return NOT_TESTABLE
  if any(w != paper for w, paper in words):
    return UNDECIDED
  return REPRODUCED


def _shown(values: Values, reading: Reading, row: Row) -> str:
  """A row's reading over seeds, as a table would show it."""
  if reading.rounds_to:
    text = seed_stats.spread(values.compared, digits=0)
    if values.unreached:
      text += f' ({values.unreached} of {len(values.compared)} never reach it)'
  elif row.drop_from:
    text = f'drop {seed_stats.spread(values.compared, 100, 1)}%'
  else:
    text = seed_stats.spread(values.compared)
  if values.diverged:
    text += f' ({values.diverged} of {len(values.compared)} seeds diverged)'
  return text


def evidence(claim: Claim, judged: list[Judged], floors: dict[str, list[float]]) -> str:
  """The deciding numbers: each comparison, the rule's word and the paper's; the floors."""
  parts = []
  for j in judged:
    c = j.comparison
    parts.append(f'{c.a.label} {_shown(j.a, claim.reading, c.a)} against {c.b.label} '
                 f'{_shown(j.b, claim.reading, c.b)}: **{j.verdict}**, paper: {c.paper}')
  text = '; '.join(parts)
  if floors:
    text += '. Floors: ' + ', '.join(f'{label} {seed_stats.spread(values)}'
                                     for label, values in floors.items())
  reading = claim.reading.describe()
  if claim.reading.rounds_to:
    reading = f'rounds to the reference\'s best {reading}' + (
        f' less {claim.reading.margin:g}' if claim.reading.margin else '')
  text += f' ({reading}; seeds {list(claim.seeds)})'
  return text + (f'. {claim.note}' if claim.note else '')


HEADER = ('| paper | claim (data) | verdict | deciding numbers |', '|---|---|---|---|')


def rows(claims: list[Claim], results: pathlib.Path, link: bool) -> list[str]:
  """A verdict table's rows, the data with a link to its folder's README if `link`."""
  lines, last_paper = [], None
  for claim in claims:
    word, judged, floors = judge(claim, results)
    data = f'[{claim.data}]({claim.folder}/README.md)' if link else claim.data
    paper = '' if claim.paper == last_paper else claim.paper
    last_paper = claim.paper
    lines.append(f'| {paper} | {claim.claim} ({data}) | **{word}** | '
                 f'{evidence(claim, judged, floors)} |')
  return lines


def block(claims: list[Claim], results: pathlib.Path, link: bool) -> str:
  return '\n'.join([BEGIN, *HEADER, *rows(claims, results, link), END])


def with_block(text: str, new_block: str, where: str) -> str:
  """`text` with its generated block replaced by `new_block`."""
  if text.count(BEGIN) != 1 or text.count(END) != 1:
    raise ClaimError(f'{where}: needs one line {BEGIN!r} and one {END!r} around its verdicts')
  before, rest = text.split(BEGIN)
  return before + new_block + rest.split(END, 1)[1]


FILE = 'claims.toml'  # in the results folder


def write_blocks(results: pathlib.Path, readmes: pathlib.Path, folders: list[str],
                 top: bool) -> None:
  """Regenerates the verdict block of each of `folders`' READMEs under `readmes` (its
  own claims) and, if `top`, of `readmes`/README.md (every claim; copied there from
  `results` first), judging results/FILE's claims from the records under `results`."""
  claims = [c for c in load(results / FILE) if c.folder in folders]
  targets = {}
  if top:
    if readmes != results:
      shutil.copy(results / 'README.md', readmes / 'README.md')
    targets[readmes / 'README.md'] = (claims, True)
  for folder in dict.fromkeys(c.folder for c in claims):
    targets[readmes / folder / 'README.md'] = ([c for c in claims if c.folder == folder], False)
  for path, (chosen, link) in targets.items():
    text = path.read_text()
    new = with_block(text, block(chosen, results, link), str(path))
    if new != text:
      path.write_text(new)
