r"""Benchmarks that print ratios measured in one run (never timed unit tests).

The benchmarks are experiments/benchmark.py: its flags, what each one times, and how.
"""

from absl import app

from experiments import benchmark

main = benchmark.main

if __name__ == '__main__':
  # common.run's set-up (its task flags collide with these): TFF's import-time
  # context closed, so every computation runs inside a runtime (runtime.native).
  from tff_rec.runtime import native  # pylint: disable=g-import-not-at-top
  native.drop_tff_default_context()
  app.run(main)
