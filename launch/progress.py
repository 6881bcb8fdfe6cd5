"""What a run prints and reports as it goes: a progress line with an ETA, and
the first round (epoch) that reached a --target."""

import pathlib
import time

from absl import app
import pandas as pd

from tff_rec.training import loop


class Progress:
  """Prints one line per step: chosen metrics, time per step and an ETA.

  `shown` maps a short label to a metric key; absent metrics are skipped.
  The first step seen may be past 1 (a resumed run): the ETA counts from it. Its
  time includes set-up and compiling, so later steps are timed from its end.
  """

  def __init__(self, total: int, unit: str, shown: dict[str, str]):
    self.total, self.unit, self.shown = total, unit, shown
    self.first = None
    self.started = time.monotonic()

  def __call__(self, step: int, metrics: dict[str, float]) -> None:
    now = time.monotonic()
    if self.first is None:
      self.first, self.first_done = step, now
      if step > 1:
        print(f'resumed from the checkpoint of {self.unit} {step - 1}: {self.unit} {step} '
              'on', flush=True)
    per_step = ((now - self.started) if step == self.first
                else (now - self.first_done) / (step - self.first))
    eta = per_step * (self.total - step)
    nothing = loop.trained_nothing(metrics)  # its loss of 0 is a mean over no example
    values = '  '.join(
        ['no example trained (none of the cohort\'s clients holds a batch)'] * nothing
        + [f'{label} {_four_digits(metrics[key])}' for label, key in self.shown.items()
           if key in metrics and not (nothing and key == loop.TRAIN_LOSS)])
    print(f'{self.unit} {step}/{self.total}  {values}  '
          f'{per_step:.2f} s/{self.unit}  ETA {duration(eta)}', flush=True)


def parse_target(text: str | None) -> tuple[str, str, float] | None:
  """'metric>=value' or 'metric<=value' -> (metric, op, value); a UsageError otherwise."""
  if text is None:
    return None
  for op in ('>=', '<='):
    metric, found, value = text.partition(op)
    if found:
      try:
        return metric.strip(), op, float(value)
      except ValueError:
        break
  raise app.UsageError(f'--target={text}: expected METRIC>=VALUE or METRIC<=VALUE, '
                       'e.g. eval/test_auc>=0.6')


def check_target_part(target, parts) -> None:
  """A UsageError, before training, for a target outside the parts a run reports
  (train/ and the task's evaluation parts)."""
  if target is not None and target[0].split('/', 1)[0] not in parts:
    raise app.UsageError(f'--target metric {target[0]!r}: this run reports metrics under '
                         f'{", ".join(p + "/" for p in sorted(set(parts)))} only')


def check_target_reported(target, metrics: dict[str, float]) -> None:
  """A UsageError once a step's metrics hold others of the target's part (its
  prefix, e.g. eval/) but not the target's metric: a misspelt target stops at
  the first evaluation, not after the whole run."""
  if target is None:
    return
  metric = target[0]
  part = metric.split('/', 1)[0] + '/'
  same_part = sorted(k for k in metrics if k.startswith(part))
  if same_part and metric not in metrics:
    raise app.UsageError(f'--target metric {metric!r} is not among the evaluated metrics: '
                         f'{", ".join(same_part)}')


def first_reached(metrics_csv: pathlib.Path, step: str, target) -> dict:
  """The first `step` (round, epoch) in a run's metrics.csv that reached the target.

  Read back from the CSV, so a resumed run counts the rounds before its
  restart. Returns the summary entries: target, rounds_to_target (None if
  not reached).
  """
  metric, op, value = target
  table = pd.read_csv(metrics_csv)
  if metric not in table:
    raise app.UsageError(f'--target metric {metric!r} was never reported; evaluated '
                         f'metrics: {", ".join(c for c in table if "/" in c)}')
  values = table[metric]
  reached = table[step][values >= value if op == '>=' else values <= value]
  first = int(reached.min()) if len(reached) else None
  print(f'target {metric}{op}{value:g}: ' + (f'reached at {step} {first}' if first else
        f'not reached in {int(table[step].max())} {step}s'), flush=True)
  return {'target': f'{metric}{op}{value:g}', 'rounds_to_target': first}


def _four_digits(value: float) -> str:
  """6.800 beside 6.832, not 6.8 ('#' keeps trailing zeros); 3200, not '3200.'."""
  return f'{value:#.4g}'.rstrip('.')


def duration(seconds: float) -> str:
  minutes, seconds = divmod(int(seconds), 60)
  hours, minutes = divmod(minutes, 60)
  return f'{hours}h{minutes:02d}m' if hours else f'{minutes}m{seconds:02d}s'
