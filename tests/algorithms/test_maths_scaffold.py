"""SCAFFOLD as launch.train runs it, against Karimireddy et al.'s option II in
numpy: each client's corrected steps, its control variate kept between the rounds
it joins, the server's variate moved by |S| / N of the mean change. Two rounds of
4 of the 6 clients of a small CTR file (tests/algorithms/small_ctr.py), client by
client and in lockstep (keras_lockstep, each client's correction its own)."""

import numpy as np
import pytest

from tests.algorithms import as_trained
from tests.algorithms import reference
from tests.algorithms import small_ctr


@pytest.mark.parametrize('flags', [{}, dict(runtime='inprocess', lockstep='on')])
def test_scaffold_corrects_steps_with_variates_kept_between_rounds(monkeypatch, tmp_path,
                                                                   flags):
  server_rate = 0.6
  run = as_trained.train(monkeypatch, tmp_path, *small_ctr.flags(
      small_ctr.write(tmp_path), algorithm='scaffold', server_learning_rate=server_rate,
      **flags))
  model = reference.LogisticRegression(small_ctr.COLUMNS)
  rate = small_ctr.CLIENT_RATE
  x = run.initial
  server_control = [np.zeros_like(w) for w in x]
  controls = {}  # client -> its variate, zeros until it first trains
  rejoined = 0
  for cohort in run.rounds:
    moves, changes = [], []
    for client in cohort:
      _, batches = client.input
      rejoined += client.id in controls
      own = controls.get(client.id, [np.zeros_like(w) for w in x])
      y, _, steps, _ = reference.local_training(
          model.gradient, x, reference.batches_of(batches), reference.SGD(rate),
          hook=lambda g, own=own: [a - ci + c for a, ci, c in zip(g, own, server_control)])
      new = [ci - c + (start - end) / (steps * rate)
             for ci, c, start, end in zip(own, server_control, x, y)]
      moves.append([end - start for end, start in zip(y, x)])
      changes.append([n - ci for n, ci in zip(new, own)])
      controls[client.id] = new
    x = [w + server_rate * d for w, d in zip(x, reference.weighted_mean(moves, [1] * len(moves)))]
    server_control = [c + sum(d[i] for d in changes) / len(small_ctr.COUNTS)
                      for i, c in enumerate(server_control)]
  assert rejoined  # a client of round 2 trained in round 1: its own variate steers it
  reference.assert_matches(run, x)
