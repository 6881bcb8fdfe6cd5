"""The FedAvg family as launch.train runs it, against its maths in numpy
(tests/algorithms/reference.py): FedAvg weighing clients by examples or equally,
FedProx's proximal term, FedAdam's and FedAdagrad's server steps, FedSubAvg's
N / n_m, FedSGD's one gradient. A small CTR file whose clients hold unequal
numbers of examples; LR over its item and genre columns; two rounds."""

import pytest

from tests.algorithms import as_trained
from tests.algorithms import reference
from tests.algorithms import small_ctr

COLUMNS = small_ctr.COLUMNS
CLIENT_RATE = small_ctr.CLIENT_RATE
_flags = small_ctr.flags


@pytest.fixture
def ctr_file(tmp_path):
  return small_ctr.write(tmp_path)


def _fedavg(run, **options):
  """FedAvg's rounds (reference.fedavg) with LR, each client's sliced batches."""
  return reference.fedavg(run, reference.LogisticRegression(COLUMNS).gradient,
                          lambda client: reference.batches_of(client.input), CLIENT_RATE,
                          **options)


# The cohort client by client, or in lockstep (keras_lockstep: the same maths).
IN_LOCKSTEP = dict(runtime='inprocess', lockstep='on')


@pytest.mark.parametrize('heat, flags', [('clients', {}), ('examples', IN_LOCKSTEP)])
def test_fedavg_weighs_clients_as_its_heat_says(monkeypatch, tmp_path, ctr_file, heat, flags):
  run = as_trained.train(monkeypatch, tmp_path, *_flags(ctr_file, algorithm='fedavg',
                                                         heat=heat, **flags))
  reference.assert_matches(run, _fedavg(run, weighting=heat))


@pytest.mark.parametrize('flags', [{}, IN_LOCKSTEP])
def test_fedprox_pulls_each_step_towards_the_broadcast_model(monkeypatch, tmp_path, ctr_file,
                                                             flags):
  """A strength other than 1, so a term that ignores or squares it differs."""
  run = as_trained.train(monkeypatch, tmp_path, *_flags(
      ctr_file, algorithm='fedprox', proximal_strength=2.5, **flags))
  reference.assert_matches(run, _fedavg(run, weighting='clients', proximal=2.5))


@pytest.mark.parametrize('algorithm, rate, adaptivity, server', [
    ('fedadam', 0.02, 0.01, lambda: reference.Adam(0.02, epsilon=0.01)),
    ('fedadagrad', 0.3, 0.001, lambda: reference.Adagrad(0.3, initial=1e-6, epsilon=1e-6))])
def test_adaptive_servers_step_by_the_mean_update(monkeypatch, tmp_path, ctr_file, algorithm,
                                                  rate, adaptivity, server):
  run = as_trained.train(monkeypatch, tmp_path, *_flags(
      ctr_file, algorithm=algorithm, server_learning_rate=rate,
      **({'server_adaptivity': adaptivity} if adaptivity else {})))
  reference.assert_matches(run, _fedavg(run, weighting='clients', server=server()))


@pytest.mark.parametrize('heat, bound', [('clients', None), ('clients', 2.5),
                                         ('examples', 3.0)])
def test_fedsubavg_scales_each_row_by_n_over_its_heat(monkeypatch, tmp_path, ctr_file, heat,
                                                      bound):
  run = as_trained.train(monkeypatch, tmp_path, *_flags(
      ctr_file, algorithm='fedsubavg', heat=heat,
      **({'max_correction': bound} if bound else {})))
  scales = small_ctr.row_scales(run.task, heat, bound)
  # The correction is large somewhere, and the bound cuts it.
  assert max(s.max() for s in small_ctr.row_scales(run.task, heat, None)) > (bound or 3)
  reference.assert_matches(run, _fedavg(run, weighting=heat, row_scales=scales))


def test_fedsubavg_stacked_on_fedadam_scales_the_mean_before_adams_step(monkeypatch, tmp_path,
                                                                       ctr_file):
  """Adam's step is blind to a per-row scale of its pseudo-gradient but for its tau
  (m / (sqrt(v) + tau)): a tau near the updates' size lets the correction show."""
  run = as_trained.train(monkeypatch, tmp_path, *_flags(
      ctr_file, algorithm='fedadam', stack='fedsubavg', server_learning_rate=0.05,
      server_adaptivity=0.05))
  reference.assert_matches(run, _fedavg(
      run, weighting='clients', server=reference.Adam(0.05, epsilon=0.05),
      row_scales=small_ctr.row_scales(run.task, 'clients', None)))


def test_fedsgd_steps_by_the_cohorts_mean_gradient(monkeypatch, tmp_path, ctr_file):
  """One gradient per client over all its examples at the broadcast model; the
  server's step is the mean over the cohort's examples."""
  rate = 2.0
  run = as_trained.train(monkeypatch, tmp_path, *_flags(
      ctr_file, algorithm='fedsgd', server_learning_rate=rate, client_learning_rate=None))
  model = reference.LogisticRegression(COLUMNS)
  weights = run.initial
  for cohort in run.rounds:
    gradients, counts = [], []
    for client in cohort:
      examples, labels, _ = client.input  # ClientArrays.arguments: labels [n, 1]
      _, gradient = model.gradient(weights, examples, labels[:, 0])
      gradients.append(gradient)
      counts.append(len(labels))
    mean = reference.weighted_mean(gradients, counts)
    weights = [w - rate * g for w, g in zip(weights, mean)]
  reference.assert_matches(run, weights)
